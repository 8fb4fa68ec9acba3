import { readFileSync } from 'node:fs';

/**
 * The gateway's version, from its package.json (two levels up from this file, both in src/ and in
 * the compiled build in dist/): shown in `floodgate_build_info` and the start-up log.
 */
export const GATEWAY_VERSION: string = (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }).version;
