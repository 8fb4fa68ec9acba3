import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { admitted, refused, rule, setup, statusOf } from './helpers.ts';

describe('what routing needs from admission', () => {
  it('says whether a user-path rule is among the breaches, even when another breach is reported', () => {
    const { limiter } = setup([
      rule('user_path', '/a', 60, { maxRequests: 1 }),
      rule('provider', 'p', 3600, { maxRequests: 1 }),
    ]);
    admitted(limiter.admit({ userPath: '/a', provider: 'p', model: 'm' })).release();
    const both = refused(limiter.admit({ userPath: '/a', provider: 'p', model: 'm' }));
    assert.equal(both.breach.scope, 'provider', 'the hour-long provider breach has the longer Retry-After');
    assert.equal(both.userPathBreached, true);
    const targetOnly = refused(limiter.admit({ userPath: '/other', provider: 'p', model: 'm' }));
    assert.equal(targetOnly.userPathBreached, false);
  });

  it('frees provider and model slots at the end of an attempt while the user-path slot stays held', () => {
    const { limiter } = setup([
      rule('user_path', '/a', 0, { maxRequests: 1 }),
      rule('provider', 'p', 0, { maxRequests: 1 }),
      rule('model', 'm', 0, { maxRequests: 1 }),
    ]);
    const ticket = admitted(limiter.admit({ userPath: '/a', provider: 'p', model: 'm' }));
    assert.equal(ticket.holdsSlots, true);
    ticket.releaseTargetSlots();
    ticket.releaseTargetSlots();
    assert.equal(statusOf(limiter, 'provider', 'p', 0).in_flight, 0);
    assert.equal(statusOf(limiter, 'model', 'm', 0).in_flight, 0);
    assert.equal(statusOf(limiter, 'user_path', '/a', 0).in_flight, 1);
    ticket.release();
    ticket.release();
    assert.equal(statusOf(limiter, 'user_path', '/a', 0).in_flight, 0);
    assert.equal(statusOf(limiter, 'provider', 'p', 0).in_flight, 0);
  });
});
