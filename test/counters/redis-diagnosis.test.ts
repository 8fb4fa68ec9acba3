import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { classifyRedisError } from '../../src/counters/redis/diagnosis.ts';

const error = (message: string, code?: string): Error => Object.assign(new Error(message), code === undefined ? {} : { code });

describe('Redis connection errors, named', () => {
  it('authentication: a wrong password, none where one is required, an old server\'s wording', () => {
    for (const message of ['WRONGPASS invalid username-password pair or user is disabled.', 'NOAUTH Authentication required.', 'ERR invalid password']) {
      assert.equal(classifyRedisError(error(message), 0)?.cause, 'authentication failed', message);
    }
  });

  it('TLS: OpenSSL, Node and certificate failures', () => {
    const cases = [
      error('self-signed certificate', 'DEPTH_ZERO_SELF_SIGNED_CERT'),
      error('certificate has expired', 'CERT_HAS_EXPIRED'),
      error('unable to verify the first certificate', 'UNABLE_TO_VERIFY_LEAF_SIGNATURE'),
      error("Hostname/IP does not match certificate's altnames", 'ERR_TLS_CERT_ALTNAME_INVALID'),
      error('error:0A00010B:SSL routines::wrong version number', 'ERR_SSL_WRONG_VERSION_NUMBER'),
      error('Client network socket disconnected before secure TLS connection was established', 'ECONNRESET'),
    ];
    for (const err of cases) assert.equal(classifyRedisError(err, 0)?.cause, 'TLS handshake failed', err.message);
  });

  it('a database the server does not have, by number', () => {
    assert.deepEqual(classifyRedisError(error('ERR DB index is out of range'), 99), { kind: 'database', cause: 'database 99 does not exist', detail: 'ERR DB index is out of range' });
  });

  it('a plain connection failure has no name of its own', () => {
    for (const err of [error('connect ECONNREFUSED 127.0.0.1:6379', 'ECONNREFUSED'), error('connect ETIMEDOUT', 'ETIMEDOUT'), error('Connection is closed.')]) {
      assert.equal(classifyRedisError(err, 0), undefined, err.message);
    }
  });
});
