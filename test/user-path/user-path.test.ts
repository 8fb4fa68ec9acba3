import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { directChild, forEachAncestor, isUnder, normalizeUserPath, subtreeMatch } from '../../src/user-path/user-path.ts';

describe('user paths', () => {
  it('normalise to one spelling', () => {
    assert.deepEqual(normalizeUserPath(' team//a/ '), { ok: true, value: '/team/a' });
    assert.deepEqual(normalizeUserPath(''), { ok: true, value: '/' });
    assert.deepEqual(normalizeUserPath('/e\u0301quipe'), { ok: true, value: '/\u00e9quipe' });
    assert.deepEqual(normalizeUserPath('/a/../b', 'x-floodgate-user-path header'), { ok: false, error: "x-floodgate-user-path header must not contain '.' or '..' segments" });
  });

  it('are under themselves and their ancestors, case-insensitively, never under a sibling sharing a prefix', () => {
    assert.equal(isUnder('/team/alice', '/team'), true);
    assert.equal(isUnder('/Team/Alice', '/team'), true);
    assert.equal(isUnder('/team', '/TEAM'), true);
    assert.equal(isUnder('/teamster', '/team'), false);
    assert.equal(isUnder('/team', '/team/alice'), false);
    assert.equal(isUnder('/anything', '/'), true);
  });

  it('list the paths governing one, root first', () => {
    const seen: string[] = [];
    forEachAncestor('/team/alice/x', (path) => seen.push(path));
    assert.deepEqual(seen, ['/', '/team', '/team/alice', '/team/alice/x']);
    const root: string[] = [];
    forEachAncestor('/', (path) => root.push(path));
    assert.deepEqual(root, ['/']);
  });

  it('name the direct child of a parent that a path lies in', () => {
    assert.equal(directChild('/team', '/team/alice/x'), 'alice');
    assert.equal(directChild('/team', '/team/bob'), 'bob');
    assert.equal(directChild('/team', '/team'), undefined);
    assert.equal(directChild('/', '/a/b'), 'a');
  });

  it('select a subtree in SQL with LIKE metacharacters escaped', () => {
    assert.equal(subtreeMatch('/'), undefined);
    assert.equal(subtreeMatch(' / '), undefined);
    assert.deepEqual(subtreeMatch('/a_b/'), { exact: '/a_b', below: '/a\\_b/%' });
    assert.deepEqual(subtreeMatch('/50%\\x'), { exact: '/50%\\x', below: '/50\\%\\\\x/%' });
  });
});
