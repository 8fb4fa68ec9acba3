import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { admitted, immediate, refused, rule, setup, statusOf } from './helpers.ts';

describe('rule matching', () => {
  it('applies a user-path rule to its subtree only, respecting segment boundaries', () => {
    const { limiter } = setup([rule('user_path', '/a', 60, { maxRequests: 1 })]);
    admitted(limiter.admit({ userPath: '/a/b' }));
    refused(limiter.admit({ userPath: '/a' })); // one shared counter for the whole subtree
    refused(limiter.admit({ userPath: '/a/c/d' }));
    admitted(limiter.admit({ userPath: '/a-b' }));
    admitted(limiter.admit({ userPath: '/ab' }));
    admitted(limiter.admit({ userPath: '/' }));
    admitted(limiter.admit({ provider: 'openai', model: 'gpt-4o' })); // no user path → no user-path rules
  });

  it('applies a root rule to every user path', () => {
    const { limiter } = setup([rule('user_path', '/', 60, { maxRequests: 3 })]);
    admitted(limiter.admit({ userPath: '/' }));
    admitted(limiter.admit({ userPath: '/x' }));
    admitted(limiter.admit({ userPath: '/y/z' }));
    assert.equal(refused(limiter.admit({ userPath: '/q' })).message, 'rate limit exceeded for /: minute request limit of 3 reached');
  });

  it('matches user paths case-insensitively and normalises unnormalised input', () => {
    const { limiter } = setup([rule('user_path', '/Team', 60, { maxRequests: 2 })]);
    admitted(limiter.admit({ userPath: '/team/x' }));
    admitted(limiter.admit({ userPath: 'TEAM//y/' }));
    const refusal = refused(limiter.admit({ userPath: '/tEaM' }));
    assert.equal(refusal.breach.subject, '/Team'); // shown with its written spelling
    assert.throws(() => limiter.admit({ userPath: '/a/../team' }), /'\.' or '\.\.'/);
  });

  it('matches provider rules by instance name, case-insensitively', () => {
    const { limiter } = setup([rule('provider', 'OpenAI', 60, { maxRequests: 1 })]);
    admitted(limiter.admit({ provider: 'openai', model: 'gpt-4o' }));
    const refusal = refused(limiter.admit({ provider: 'OPENAI' }));
    assert.equal(refusal.message, 'rate limit exceeded for provider OpenAI: minute request limit of 1 reached');
    admitted(limiter.admit({ provider: 'openai-2' }));
    admitted(limiter.admit({ userPath: '/openai' }));
  });

  it('scopes a qualified model subject to its provider and a bare one to any provider', () => {
    const { limiter } = setup([
      rule('model', 'OpenAI/GPT-4o', 60, { maxRequests: 1 }),
      rule('model', 'claude-3', 60, { maxRequests: 2 }),
    ]);
    admitted(limiter.admit({ provider: 'openai', model: 'gpt-4o' }));
    const refusal = refused(limiter.admit({ provider: 'OPENAI', model: 'Gpt-4o' }));
    assert.equal(refusal.message, 'rate limit exceeded for model OpenAI/GPT-4o: minute request limit of 1 reached');
    admitted(limiter.admit({ provider: 'azure', model: 'gpt-4o' }));
    admitted(limiter.admit({ provider: 'azure', model: 'gpt-4o' }));

    admitted(limiter.admit({ provider: 'anthropic', model: 'claude-3' }));
    admitted(limiter.admit({ provider: 'bedrock', model: 'CLAUDE-3' }));
    refused(limiter.admit({ provider: 'vertex', model: 'claude-3' })); // one shared counter across providers
    admitted(limiter.admit({ model: 'gpt-4o' })); // model rules need the executing provider
  });

  it('handles model ids that contain a slash', () => {
    const { limiter } = setup([
      rule('model', 'meta/llama-3', 60, { maxRequests: 1 }),
      rule('model', 'together/meta/llama-3', 60, { maxRequests: 5 }),
    ]);
    admitted(limiter.admit({ provider: 'together', model: 'meta/llama-3' }));
    assert.equal(statusOf(limiter, 'model', 'together/meta/llama-3', 60).requests_used, 1);
    refused(limiter.admit({ provider: 'groq', model: 'meta/llama-3' })); // bare subject, any provider
    assert.equal(statusOf(limiter, 'model', 'together/meta/llama-3', 60).requests_used, 1);
  });

  it('sees rule changes immediately despite cached lookups', () => {
    const { limiter } = setup([rule('provider', 'other', 60, { maxRequests: 1 })]);
    admitted(limiter.admit({ userPath: '/a/b' }));
    admitted(limiter.admit({ userPath: '/a/b' }));
    limiter.upsertRule(rule('user_path', '/a', 60, { maxRequests: 1 }));
    admitted(limiter.admit({ userPath: '/a/b' }));
    refused(limiter.admit({ userPath: '/a/b' }));
    assert.equal(immediate(limiter.deleteRule({ scope: 'user_path', subject: '/A', periodSeconds: 60 })), true);
    admitted(limiter.admit({ userPath: '/a/b' }));
  });

  it('matches each lookup afresh when only its provider or model differs from the one before', () => {
    const { limiter } = setup([rule('provider', 'p1', 60, { maxRequests: 1 }), rule('model', 'p1/m1', 60, { maxRequests: 2 })]);
    admitted(limiter.admit({ userPath: '/u', provider: 'p1', model: 'm1' }));
    admitted(limiter.admit({ userPath: '/u', provider: 'p2', model: 'm1' })); // p1's rules do not follow
    refused(limiter.admit({ userPath: '/u', provider: 'p1', model: 'm2' }));
    admitted(limiter.admit({ userPath: '/u', provider: 'p2', model: 'm2' }));
    admitted(limiter.admit({ userPath: '/v', provider: 'p2', model: 'm2' }));
    assert.equal(refused(limiter.admit({ provider: 'p1', model: 'm1' })).breach.scope, 'provider');
  });

  it('stays correct when a flood of distinct paths overflows the lookup cache', () => {
    const { limiter } = setup([rule('user_path', '/t', 86400, { maxRequests: 20_005 })]);
    for (let i = 0; i < 20_000; i++) admitted(limiter.admit({ userPath: `/t/u${i}` }));
    assert.equal(statusOf(limiter, 'user_path', '/t', 86400).requests_used, 20_000);
  });
});
