/**
 * Resolver: direct `provider/model`, bare model (first provider serving it), aliases,
 * the failover map (keyed by alias name, `provider/model` or bare model), unknown names,
 * and configuration errors raised as RoutingError naming the offending key.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Resolver, RoutingError } from '../../src/routing/resolver.ts';
import type { Route, Target } from '../../src/routing/types.ts';
import { world } from './helpers.ts';

const ids = (targets: readonly Target[]): string[] => targets.map((t) => t.id);

function must(route: Route | undefined, name: string): Route {
  assert.ok(route !== undefined, `${name} should resolve`);
  return route;
}

describe('Resolver: direct models', () => {
  const { providers, models } = world({ a: ['m1', 'shared'], b: ['m1', 'm2', 'shared'], c: ['m3'] });
  const resolver = new Resolver(providers, models);

  it('provider/model addresses exactly that provider instance', () => {
    const route = must(resolver.resolve('b/m1'), 'b/m1');
    assert.equal(route.requested, 'b/m1');
    assert.equal(route.cacheModel, 'b/m1');
    assert.deepEqual(ids(route.primary), ['b/m1']);
    assert.equal(route.primary[0]!.provider.name, 'b');
    assert.equal(route.primary[0]!.model, 'm1', 'the provider gets its own model id, without the prefix');
    assert.equal(route.first, route.primary[0]);
    assert.deepEqual(route.failover, []);
  });

  it('a bare model resolves to the first configured provider serving it', () => {
    const m1 = must(resolver.resolve('m1'), 'm1');
    assert.deepEqual(ids(m1.primary), ['a/m1']);
    assert.equal(m1.requested, 'm1');
    assert.equal(m1.cacheModel, 'a/m1', 'bare and qualified names of one target share cache entries');
    assert.deepEqual(ids(must(resolver.resolve('m2'), 'm2').primary), ['b/m2'], 'only b serves m2');
    assert.deepEqual(ids(must(resolver.resolve('m3'), 'm3').primary), ['c/m3']);
    assert.deepEqual(ids(must(resolver.resolve('shared'), 'shared').primary), ['a/shared']);
  });

  it('the same name resolves the same way every time (direct routes are shared objects)', () => {
    assert.equal(resolver.resolve('a/m1'), resolver.resolve('a/m1'));
    assert.equal(resolver.resolve('m1'), resolver.resolve('m1'));
  });

  it('unknown names resolve to undefined', () => {
    for (const name of ['nope', 'a/m2', 'c/m1', 'x/m1', '/m1', 'a/', '', 'A/m1', 'fast']) {
      assert.equal(resolver.resolve(name), undefined, `"${name}" must not resolve`);
    }
  });

  it('a provider whose model list is unknown (discovery failed) accepts any qualified model of its own', () => {
    const w = world({ a: ['m1'], open: [] });
    const r = new Resolver(w.providers, w.models);
    const route = must(r.resolve('open/anything-v2'), 'open/anything-v2');
    assert.deepEqual(ids(route.primary), ['open/anything-v2']);
    assert.equal(route.primary[0]!.model, 'anything-v2');
    assert.equal(r.resolve('open/'), undefined);
    assert.equal(r.resolve('anything-v2'), undefined, 'a bare name needs a provider known to serve it');
    assert.equal(r.resolve('a/other'), undefined, 'a provider with a known list stays strict');
  });

  it('provider() looks up an instance by name', () => {
    assert.equal(resolver.provider('b')?.name, 'b');
    assert.equal(resolver.provider('zz'), undefined);
  });
});

describe('Resolver: aliases', () => {
  const { providers, models } = world({ a: ['m1'], b: ['m1', 'm2'], c: ['m1'] });

  it('an alias resolves through its balancer: requested is the alias, cacheModel alias:<name>, first its first target', () => {
    const r = new Resolver(providers, models, {
      aliases: { fast: { strategy: 'round_robin', targets: [{ model: 'a/m1', weight: 1 }, { model: 'b/m1', weight: 1 }] } },
    });
    const one = must(r.resolve('fast'), 'fast');
    const two = must(r.resolve('fast'), 'fast');
    assert.equal(one.requested, 'fast');
    assert.equal(one.cacheModel, 'alias:fast');
    assert.equal(two.cacheModel, 'alias:fast');
    assert.deepEqual(ids(one.primary), ['a/m1', 'b/m1']);
    assert.deepEqual(ids(two.primary), ['b/m1', 'a/m1']);
    assert.equal(one.first.id, 'a/m1');
    assert.equal(two.first.id, 'a/m1', 'first stays the first listed target whatever the rotation');
    assert.deepEqual(one.failover, []);
  });

  it('alias targets may be bare models (resolved to the first provider serving them)', () => {
    const r = new Resolver(providers, models, { aliases: { x: { strategy: 'first', targets: [{ model: 'm2', weight: 1 }, { model: 'm1', weight: 1 }] } } });
    assert.deepEqual(ids(must(r.resolve('x'), 'x').primary), ['b/m2', 'a/m1']);
  });

  it('listModels lists every provider model qualified, then the aliases', () => {
    const r = new Resolver(providers, models, {
      aliases: {
        fast: { strategy: 'round_robin', targets: [{ model: 'a/m1', weight: 1 }] },
        cheap: { strategy: 'first', targets: [{ model: 'b/m2', weight: 1 }] },
      },
    });
    assert.deepEqual(r.listModels(), [
      { id: 'a/m1', ownedBy: 'a' },
      { id: 'b/m1', ownedBy: 'b' },
      { id: 'b/m2', ownedBy: 'b' },
      { id: 'c/m1', ownedBy: 'c' },
      { id: 'fast', ownedBy: 'floodgate' },
      { id: 'cheap', ownedBy: 'floodgate' },
    ]);
  });

  it('a misconfigured alias target throws RoutingError naming the key', () => {
    const bad = (target: string) => () =>
      new Resolver(providers, models, { aliases: { fast: { strategy: 'first', targets: [{ model: 'a/m1', weight: 1 }, { model: target, weight: 1 }] } } });
    for (const target of ['a/m2', 'zz/m1', 'nope']) {
      assert.throws(bad(target), (err: unknown) => {
        assert.ok(err instanceof RoutingError, `expected RoutingError, got ${String(err)}`);
        assert.equal(err.name, 'RoutingError');
        assert.match(err.message, /aliases\.fast\.targets\[1\]/);
        assert.ok(err.message.includes(`"${target}"`), err.message);
        return true;
      });
    }
  });

  it('a misconfigured failover candidate throws RoutingError naming the key', () => {
    assert.throws(
      () => new Resolver(providers, models, { failover: { 'a/m1': ['b/m1', 'c/m9'] } }),
      (err: unknown) => err instanceof RoutingError && /failover\.a\/m1/.test(err.message) && err.message.includes('"c/m9"'),
    );
  });
});

describe('Resolver: failover map', () => {
  const { providers, models } = world({ a: ['m1'], b: ['m1', 'm2'], c: ['m1', 'm2'] });

  it('keyed by provider/model: applies to that target, also when reached by its bare name', () => {
    const r = new Resolver(providers, models, { failover: { 'a/m1': ['b/m1', 'c/m1'] } });
    assert.deepEqual(ids(must(r.resolve('a/m1'), 'a/m1').failover), ['b/m1', 'c/m1']);
    assert.deepEqual(ids(must(r.resolve('m1'), 'm1').failover), ['b/m1', 'c/m1'], 'bare m1 is a/m1');
    assert.deepEqual(must(r.resolve('b/m1'), 'b/m1').failover, [], 'other targets are not affected');
  });

  it('keyed by a bare model: applies to that model on any provider', () => {
    const r = new Resolver(providers, models, { failover: { m2: ['c/m2'] } });
    assert.deepEqual(ids(must(r.resolve('m2'), 'm2').failover), ['c/m2']);
    assert.deepEqual(ids(must(r.resolve('b/m2'), 'b/m2').failover), ['c/m2']);
    assert.deepEqual(ids(must(r.resolve('c/m2'), 'c/m2').failover), ['c/m2']);
    assert.deepEqual(must(r.resolve('a/m1'), 'a/m1').failover, []);
  });

  it('the most specific key wins: requested name, then provider/model, then bare model', () => {
    const r = new Resolver(providers, models, { failover: { m2: ['c/m2'], 'b/m2': ['c/m1'] } });
    assert.deepEqual(ids(must(r.resolve('b/m2'), 'b/m2').failover), ['c/m1']);
    assert.deepEqual(ids(must(r.resolve('m2'), 'm2').failover), ['c/m2'], 'requested bare name m2 is its own key');
    assert.deepEqual(ids(must(r.resolve('c/m2'), 'c/m2').failover), ['c/m2']);
  });

  it('keyed by an alias name: every route of the alias carries it, in order', () => {
    const r = new Resolver(providers, models, {
      aliases: { fast: { strategy: 'round_robin', targets: [{ model: 'a/m1', weight: 1 }, { model: 'b/m1', weight: 1 }] } },
      failover: { fast: ['c/m1', 'c/m2'] },
    });
    for (let i = 0; i < 3; i++) {
      const route = must(r.resolve('fast'), 'fast');
      assert.deepEqual(ids(route.failover), ['c/m1', 'c/m2']);
    }
    assert.deepEqual(must(r.resolve('a/m1'), 'a/m1').failover, [], 'the alias key does not leak onto its targets');
  });

  it('failover candidates may be bare models', () => {
    const r = new Resolver(providers, models, { failover: { 'a/m1': ['m2'] } });
    assert.deepEqual(ids(must(r.resolve('a/m1'), 'a/m1').failover), ['b/m2']);
  });
});

describe('Resolver: an alias named like a bare model', () => {
  const { providers, models } = world({ a: ['m1'], b: ['m1'] });
  const r = new Resolver(providers, models, {
    aliases: { m1: { strategy: 'round_robin', targets: [{ model: 'a/m1', weight: 1 }, { model: 'b/m1', weight: 1 }] } },
  });

  it('the alias wins over bare-model resolution (it is listed, so it must be reachable)', () => {
    assert.ok(r.listModels().some((m) => m.id === 'm1' && m.ownedBy === 'floodgate'));
    const first = must(r.resolve('m1'), 'm1');
    const second = must(r.resolve('m1'), 'm1');
    assert.equal(first.cacheModel, 'alias:m1');
    assert.deepEqual([first.primary[0]!.id, second.primary[0]!.id], ['a/m1', 'b/m1']);
  });

  it('provider/model still addresses one target directly', () => {
    assert.deepEqual(ids(must(r.resolve('b/m1'), 'b/m1').primary), ['b/m1']);
  });
});
