/**
 * Where a key path sits in a parsed YAML document, for messages that say `file:line:column`. A
 * path the file does not spell out (a default, a required key that is missing) is placed at its
 * nearest ancestor that the file does have.
 */
import { isAlias, isMap, isScalar, isSeq, type Document, type Node } from 'yaml';

/** The offset of the value at `path` (of its key, with `key`), and whether the path itself was found. */
export function positionOf(doc: Document, path: readonly PropertyKey[], key: boolean): { offset: number; exact: boolean } | undefined {
  let node: unknown = doc.contents;
  let offset = rangeStart(node);
  if (offset === undefined) return undefined;
  for (const [i, segment] of path.entries()) {
    if (isAlias(node)) node = node.resolve(doc);
    let next: unknown;
    let keyOffset: number | undefined;
    if (isMap(node)) {
      const pair = node.items.find((item) => isScalar(item.key) && String(item.key.value) === String(segment));
      if (pair === undefined) return { offset, exact: false };
      next = pair.value;
      keyOffset = rangeStart(pair.key);
    } else if (isSeq(node) && typeof segment === 'number' && segment < node.items.length) {
      next = node.items[segment];
    } else {
      return { offset, exact: false };
    }
    const last = i === path.length - 1;
    if (last && key && keyOffset !== undefined) return { offset: keyOffset, exact: true };
    // A key with no value (`server:`) is placed at the key.
    const start = rangeStart(next) ?? keyOffset;
    if (start === undefined) return { offset, exact: false };
    offset = start;
    node = next;
  }
  return { offset, exact: true };
}

function rangeStart(node: unknown): number | undefined {
  return node !== null && typeof node === 'object' && 'range' in node ? (node as Node).range?.[0] : undefined;
}
