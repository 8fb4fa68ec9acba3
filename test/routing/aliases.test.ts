/**
 * AliasBalancer: the order in which an alias's targets are tried for one request —
 * round_robin rotates the start, weighted is smooth weighted round robin, first always
 * starts at the first target; the remaining targets always follow so a saturated pick
 * falls through.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { AliasBalancer, type AliasDefinition } from '../../src/routing/aliases.ts';
import { Resolver } from '../../src/routing/resolver.ts';
import type { Target } from '../../src/routing/types.ts';
import { directTarget, world } from './helpers.ts';

const a = directTarget('a', 'm1');
const b = directTarget('b', 'm1');
const c = directTarget('c', 'm1');

function balancer(strategy: AliasDefinition['strategy'], targets: Target[], weights?: number[], failover: Target[] = []): AliasBalancer {
  const definition: AliasDefinition = { strategy, targets: targets.map((t, i) => ({ model: t.id, weight: weights?.[i] ?? 1 })) };
  return new AliasBalancer(definition, targets, 'fast', failover);
}

/** The first provider of each of `n` picks. */
function picks(bal: AliasBalancer, n: number): string[] {
  return Array.from({ length: n }, () => bal.next().primary[0]!.provider.name);
}

describe('AliasBalancer', () => {
  it('round_robin rotates the starting target, the rest follow in listed order', () => {
    const bal = balancer('round_robin', [a, b, c]);
    const orders = Array.from({ length: 4 }, () => bal.next().primary.map((t) => t.provider.name).join(''));
    assert.deepEqual(orders, ['abc', 'bca', 'cab', 'abc']);
  });

  it('round_robin with two targets alternates a, b, a, b', () => {
    assert.deepEqual(picks(balancer('round_robin', [a, b]), 6), ['a', 'b', 'a', 'b', 'a', 'b']);
  });

  it('weighted 1 and 2 over 6 picks: the exact smooth sequence b a b b a b, each its share', () => {
    const bal = balancer('weighted', [a, b], [1, 2]);
    const seq = picks(bal, 6);
    assert.deepEqual(seq, ['b', 'a', 'b', 'b', 'a', 'b']);
    assert.equal(seq.filter((p) => p === 'a').length, 2);
    assert.equal(seq.filter((p) => p === 'b').length, 4);
  });

  it('weighted: the order behind a pick keeps every other target as a fallback', () => {
    const bal = balancer('weighted', [a, b], [1, 2]);
    assert.deepEqual(bal.next().primary, [b, a]);
    assert.deepEqual(bal.next().primary, [a, b]);
  });

  it('weighted 3, 1, 1 spreads picks smoothly (no long runs) and gives each its share over a cycle', () => {
    const bal = balancer('weighted', [a, b, c], [3, 1, 1]);
    const seq = picks(bal, 10);
    assert.deepEqual(seq, ['a', 'b', 'a', 'c', 'a', 'a', 'b', 'a', 'c', 'a']);
    for (const [name, share] of [['a', 6], ['b', 2], ['c', 2]] as const) assert.equal(seq.filter((p) => p === name).length, share);
  });

  it('equal weights behave like round robin', () => {
    assert.deepEqual(picks(balancer('weighted', [a, b, c], [1, 1, 1]), 6), ['a', 'b', 'c', 'a', 'b', 'c']);
  });

  it('first always starts at the first target', () => {
    const bal = balancer('first', [a, b, c]);
    for (let i = 0; i < 5; i++) assert.deepEqual(bal.next().primary, [a, b, c]);
  });

  it('every route carries the alias name, its cache model, its failover and its first listed target', () => {
    const bal = balancer('round_robin', [a, b], undefined, [c]);
    for (let i = 0; i < 3; i++) {
      const route = bal.next();
      assert.equal(route.requested, 'fast');
      assert.equal(route.cacheModel, 'alias:fast');
      assert.deepEqual(route.failover, [c]);
      assert.equal(route.first, a);
    }
  });

  it('a single-target alias always yields that target', () => {
    for (const strategy of ['round_robin', 'weighted', 'first'] as const) {
      const bal = balancer(strategy, [b]);
      assert.deepEqual(picks(bal, 3), ['b', 'b', 'b'], strategy);
    }
  });

  it('through the Resolver, each alias keeps its own rotation', () => {
    const w = world({ a: ['m1'], b: ['m1'] });
    const r = new Resolver(w.providers, w.models, {
      aliases: {
        x: { strategy: 'round_robin', targets: [{ model: 'a/m1', weight: 1 }, { model: 'b/m1', weight: 1 }] },
        y: { strategy: 'round_robin', targets: [{ model: 'a/m1', weight: 1 }, { model: 'b/m1', weight: 1 }] },
      },
    });
    const first = (name: string): string => r.resolve(name)!.primary[0]!.provider.name;
    assert.deepEqual([first('x'), first('y'), first('x'), first('y'), first('x')], ['a', 'a', 'b', 'b', 'a']);
  });

  it('peek shows the route next() would return, without taking the turn, for every strategy', () => {
    for (const [strategy, weights] of [['round_robin', undefined], ['weighted', [3, 1, 2]], ['first', undefined]] as const) {
      const bal = balancer(strategy, [a, b, c], weights ? [...weights] : undefined);
      for (let i = 0; i < 7; i++) {
        const peeked = bal.peek();
        assert.equal(bal.peek(), peeked, `${strategy}: peeking twice moves nothing`);
        assert.equal(bal.next(), peeked, `${strategy}: pick ${i}`);
      }
    }
  });

  it('Resolver.preview resolves like resolve() without moving an alias', () => {
    const w = world({ a: ['m1'], b: ['m1'] });
    const resolver = new Resolver(w.providers, w.models, {
      aliases: { fast: { strategy: 'round_robin', targets: [{ model: 'a/m1', weight: 1 }, { model: 'b/m1', weight: 1 }] } },
    });
    assert.equal(resolver.preview('fast')?.primary[0]?.provider.name, 'a');
    assert.equal(resolver.preview('fast')?.primary[0]?.provider.name, 'a');
    assert.equal(resolver.resolve('fast')?.primary[0]?.provider.name, 'a');
    assert.equal(resolver.preview('fast')?.primary[0]?.provider.name, 'b');
    assert.equal(resolver.preview('a/m1'), resolver.resolve('a/m1'));
    assert.equal(resolver.preview('nope'), undefined);
  });
});
