import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { extractCredential, safeEqual } from '../../src/auth/master.ts';

describe('safeEqual', () => {
  it('compares strings of any length', () => {
    assert.equal(safeEqual('secret', 'secret'), true);
    assert.equal(safeEqual('secret', 'secreT'), false);
    assert.equal(safeEqual('secret', 'secret-but-longer'), false);
    assert.equal(safeEqual('', ''), true);
    assert.equal(safeEqual('', 'x'), false);
    assert.equal(safeEqual('ключ', 'ключ'), true);
  });
});

describe('extractCredential', () => {
  it('reads a Bearer token, scheme case-insensitive, trimmed', () => {
    assert.equal(extractCredential({ authorization: 'Bearer abc' }), 'abc');
    assert.equal(extractCredential({ authorization: 'bearer abc' }), 'abc');
    assert.equal(extractCredential({ authorization: '  BEARER    abc  ' }), 'abc');
  });

  it('reads x-api-key, trimmed', () => {
    assert.equal(extractCredential({ 'x-api-key': ' k-1 ' }), 'k-1');
    assert.equal(extractCredential({ 'x-api-key': ['k-2', 'k-3'] }), 'k-2');
  });

  it('prefers Bearer, and falls back to x-api-key when Authorization is not Bearer', () => {
    assert.equal(extractCredential({ authorization: 'Bearer a', 'x-api-key': 'b' }), 'a');
    assert.equal(extractCredential({ authorization: 'Basic dXNlcjpwYXNz', 'x-api-key': 'b' }), 'b');
    assert.equal(extractCredential({ authorization: 'Bearer   ', 'x-api-key': 'b' }), 'b');
  });

  it('returns undefined without a usable credential', () => {
    assert.equal(extractCredential({}), undefined);
    assert.equal(extractCredential({ authorization: 'Bearer' }), undefined);
    assert.equal(extractCredential({ authorization: 'Bearer ' }), undefined);
    assert.equal(extractCredential({ authorization: 'Basic abc' }), undefined);
    assert.equal(extractCredential({ authorization: 'Bearerabc' }), undefined);
    assert.equal(extractCredential({ 'x-api-key': '   ' }), undefined);
  });
});
