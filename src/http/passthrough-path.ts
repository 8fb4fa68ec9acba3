/**
 * The path a passthrough request is forwarded to, below the provider's base path. The router has
 * already decoded the URL (percent-encoded dots and slashes included), so the segments are split
 * here exactly as the router saw them; dot segments are resolved, and a path that would climb
 * above the base path is refused. Each segment is encoded again, so nothing the client sent can
 * be read as a separator or a dot segment upstream.
 */
export type ForwardedPath = { ok: true; path: string } | { ok: false; error: string };

export function forwardedPath(decoded: string): ForwardedPath {
  const segments: string[] = [];
  for (const segment of decoded.split('/')) {
    if (segment === '' || segment === '.') continue;
    if (segment === '..') {
      if (segments.length === 0) return { ok: false, error: 'path: must stay below the provider\'s base URL (too many ".." segments)' };
      segments.pop();
      continue;
    }
    // Some servers read a backslash as a separator; control characters have no place in a path.
    if (/[\\\u0000-\u001f\u007f]/.test(segment)) return { ok: false, error: 'path: backslashes and control characters are not allowed' };
    segments.push(encodeSegment(segment));
  }
  return { ok: true, path: `/${segments.join('/')}` };
}

/** Percent-encodes a path segment, keeping the sub-delimiters, `:` and `@` that paths may carry as they are. */
function encodeSegment(segment: string): string {
  return encodeURIComponent(segment).replace(/%(?:21|24|26|27|28|29|2A|2B|2C|3A|3B|3D|40)/gi, (escape) => decodeURIComponent(escape));
}
