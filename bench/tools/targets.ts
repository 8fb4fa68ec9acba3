/**
 * What the bench tools share on their command lines: counts, and the servers a tool runs one after
 * another, each `TARGET[@CHECKOUT]`: `floor` (the minimal proxy) or a gateway configuration of
 * bench/lib.ts, a gateway optionally run from another copy of the repository.
 */
import { resolve } from 'node:path';
import { GATEWAY_LABELS, REPO_DIR, startFloorProxy, startGateway, type ChildServer, type GatewayVariant } from '../lib.ts';

/** A command-line count: a whole number >= `min`, or an error naming the flag. */
export function wholeNumber(flag: string, raw: string, min: number): number {
  const value = Number(raw);
  if (!Number.isInteger(value) || value < min) throw new Error(`--${flag}: expected a whole number >= ${min}, got ${raw}`);
  return value;
}

/** `NAME[@CHECKOUT]` split: the checkout resolved, this repository when none is named. */
export function atCheckout(spec: string): { name: string; checkout: string } {
  const at = spec.indexOf('@');
  return at < 0 ? { name: spec, checkout: REPO_DIR } : { name: spec.slice(0, at), checkout: resolve(spec.slice(at + 1)) };
}

/** `floor` or a gateway configuration, and the repository copy it runs from. */
export interface ServerTarget {
  readonly name: 'floor' | GatewayVariant;
  readonly checkout: string;
}

/** The comma-separated `--targets` list, each checked. */
export function parseTargets(raw: string): ServerTarget[] {
  return raw.split(',').map((spec) => {
    const { name, checkout } = atCheckout(spec);
    if (name !== 'floor' && !(name in GATEWAY_LABELS)) throw new Error(`--targets: unknown target ${name} (floor or one of ${Object.keys(GATEWAY_LABELS).join(', ')})`);
    if (name === 'floor' && checkout !== REPO_DIR) throw new Error(`--targets: ${spec}: the minimal proxy runs from this checkout only`);
    return { name: name as ServerTarget['name'], checkout };
  });
}

/** The target as the tools' headings name it. */
export function targetTitle(target: ServerTarget): string {
  if (target.name === 'floor') return 'minimal proxy (floor)';
  return `gateway, ${GATEWAY_LABELS[target.name]}${target.checkout === REPO_DIR ? '' : ` at ${target.checkout}`}`;
}

/** Starts the target in front of `upstreamUrl`, with extra node flags. */
export function startTarget(target: ServerTarget, upstreamUrl: string, nodeFlags: readonly string[]): Promise<ChildServer> {
  return target.name === 'floor' ? startFloorProxy(upstreamUrl, nodeFlags) : startGateway(target.name, upstreamUrl, nodeFlags, target.checkout);
}
