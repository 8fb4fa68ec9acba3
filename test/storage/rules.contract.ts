/** The rules repository (src/storage/rules/), and the watchers of rules. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { assertWatcherTold, at, rule, withStorage, type Harness } from './harness.ts';

export function rulesContract(name: string, harness: Harness): void {
  describe(`Storage contract, rules: ${name}`, () => {
    it('tells a watcher of the rules of a creation, a change, a deletion and a re-seed made through another connection', async () => {
      await assertWatcherTold(harness, 'rules', [
        ['a creation', (writer) => writer.rules.upsert(rule())],
        ['a change', (writer) => writer.rules.upsert(rule({ maxRequests: 5, updatedAt: at(5) }))],
        ['a deletion', async (writer) => assert.equal(await writer.rules.delete(rule()), true)],
        ['a re-seed', (writer) => writer.rules.replaceConfig([rule({ subject: '/seeded', source: 'config' })])],
      ], (writer) => writer.rules.upsert(rule({ subject: '/later' })));
    });

    it('upserts rules by case-insensitive key, keeping createdAt', async () => {
      await withStorage(harness, async (storage) => {
        await storage.rules.upsert(rule({ subject: '/Team' }));
        await storage.rules.upsert(
          rule({ subject: '/TEAM', maxRequests: 5, maxTokens: 1000, createdAt: at(50), updatedAt: at(50) }),
        );
        const rules = await storage.rules.list();
        assert.equal(rules.length, 1);
        assert.deepEqual(rules[0], {
          ...rule(),
          subject: '/TEAM', // spelling of the latest write
          maxRequests: 5,
          maxTokens: 1000,
          createdAt: at(0),
          updatedAt: at(50),
        });
        // Same subject, other period or scope: distinct rules.
        await storage.rules.upsert(rule({ periodSeconds: 3600 }));
        await storage.rules.upsert(rule({ scope: 'model', subject: 'openai/gpt-4o', periodSeconds: 0, maxRequests: 2 }));
        await storage.rules.upsert(rule({ scope: 'provider', subject: 'openai', maxRequests: undefined, maxTokens: 9_000_000_000 }));
        const listed = await storage.rules.list();
        assert.deepEqual(
          listed.map((r) => [r.scope, r.subject, r.periodSeconds]),
          [
            ['model', 'openai/gpt-4o', 0],
            ['provider', 'openai', 60],
            ['user_path', '/TEAM', 60],
            ['user_path', '/team', 3600],
          ],
        );
        // Caps beyond 32 bits survive as numbers.
        assert.equal(listed[1]?.maxTokens, 9_000_000_000);
        assert.equal(listed[1]?.maxRequests, undefined);
      });
    });

    it('stores whether a rule is per-child; changing it updates the rule', async () => {
      await withStorage(harness, async (storage) => {
        await storage.rules.upsert(rule({ perChild: true }));
        assert.deepEqual(await storage.rules.list(), [rule({ perChild: true })]);
        await storage.rules.upsert(rule({ updatedAt: at(5) }));
        assert.deepEqual(await storage.rules.list(), [rule({ updatedAt: at(5) })]);
        await storage.rules.replaceConfig([rule({ subject: '/seeded', source: 'config', perChild: true })]);
        await storage.rules.replaceConfig([rule({ subject: '/seeded', source: 'config', createdAt: at(9), updatedAt: at(9) })]);
        const seeded = (await storage.rules.list()).find((r) => r.subject === '/seeded');
        assert.deepEqual(seeded, rule({ subject: '/seeded', source: 'config', updatedAt: at(9) }), 'a per_child change is a change: updatedAt moves');
      });
    });

    it('deletes rules case-insensitively and reports a missing rule', async () => {
      await withStorage(harness, async (storage) => {
        await storage.rules.upsert(rule({ subject: '/Team' }));
        assert.equal(await storage.rules.delete({ scope: 'user_path', subject: '/team', periodSeconds: 3600 }), false);
        assert.equal(await storage.rules.delete({ scope: 'provider', subject: '/team', periodSeconds: 60 }), false);
        assert.equal(await storage.rules.delete({ scope: 'user_path', subject: '/TEAM', periodSeconds: 60 }), true);
        assert.equal(await storage.rules.delete({ scope: 'user_path', subject: '/team', periodSeconds: 60 }), false);
        assert.deepEqual(await storage.rules.list(), []);
      });
    });

    it('replaceConfig replaces config rules, keeps manual ones and reports skipped keys', async () => {
      await withStorage(harness, async (storage) => {
        await storage.rules.upsert(rule({ subject: '/manual', source: 'manual', maxRequests: 7 }));
        await storage.rules.upsert(rule({ subject: '/Clash', source: 'manual', maxRequests: 8 }));
        const first = await storage.rules.replaceConfig([
          rule({ subject: '/old', source: 'config', createdAt: at(1), updatedAt: at(1) }),
          rule({ subject: '/kept', source: 'config', createdAt: at(1), updatedAt: at(1) }),
          rule({ subject: '/changed', source: 'config', createdAt: at(1), updatedAt: at(1) }),
          rule({ subject: '/clash', source: 'config', maxRequests: 1, createdAt: at(1), updatedAt: at(1) }),
        ]);
        assert.deepEqual(first, [{ scope: 'user_path', subject: '/clash', periodSeconds: 60 }]);

        // A restart re-seeds: /old is gone, /kept unchanged, /changed has a new cap, /new appears.
        const second = await storage.rules.replaceConfig([
          rule({ subject: '/kept', source: 'config', createdAt: at(99), updatedAt: at(99) }),
          rule({ subject: '/changed', source: 'config', maxRequests: 1, createdAt: at(99), updatedAt: at(99) }),
          rule({ subject: '/new', source: 'config', createdAt: at(99), updatedAt: at(99) }),
          rule({ subject: '/CLASH', source: 'config', createdAt: at(99), updatedAt: at(99) }),
        ]);
        assert.deepEqual(second, [{ scope: 'user_path', subject: '/CLASH', periodSeconds: 60 }]);

        const bySubject = new Map((await storage.rules.list()).map((r) => [r.subject, r]));
        assert.deepEqual([...bySubject.keys()].sort(), ['/Clash', '/changed', '/kept', '/manual', '/new']);
        assert.equal(bySubject.get('/manual')?.source, 'manual');
        assert.equal(bySubject.get('/manual')?.maxRequests, 7);
        assert.equal(bySubject.get('/Clash')?.source, 'manual');
        assert.equal(bySubject.get('/Clash')?.maxRequests, 8);
        assert.deepEqual(bySubject.get('/kept')?.createdAt, at(1));
        assert.deepEqual(bySubject.get('/kept')?.updatedAt, at(1));
        assert.deepEqual(bySubject.get('/changed')?.createdAt, at(1));
        assert.deepEqual(bySubject.get('/changed')?.updatedAt, at(99));
        assert.equal(bySubject.get('/changed')?.maxRequests, 1);
        assert.deepEqual(bySubject.get('/new')?.createdAt, at(99));
        assert.equal(bySubject.get('/new')?.source, 'config');

        // An empty declaration removes every config rule and nothing else.
        assert.deepEqual(await storage.rules.replaceConfig([]), []);
        assert.deepEqual(
          (await storage.rules.list()).map((r) => r.subject),
          ['/Clash', '/manual'],
        );
      });
    });

  });
}
