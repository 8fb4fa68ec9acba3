/**
 * What the bench tools share on their command lines: counts, and the servers a tool runs one after
 * another (`floor`, the minimal proxy, or a gateway configuration of bench/lib.ts).
 */
import { GATEWAY_LABELS, startFloorProxy, startGateway, type ChildServer, type GatewayVariant } from '../lib.ts';

/** A command-line count: a whole number >= `min`, or an error naming the flag. */
export function wholeNumber(flag: string, raw: string, min: number): number {
  const value = Number(raw);
  if (!Number.isInteger(value) || value < min) throw new Error(`--${flag}: expected a whole number >= ${min}, got ${raw}`);
  return value;
}

/** `floor` or a gateway configuration. */
export type ServerTarget = 'floor' | GatewayVariant;

/** The comma-separated `--targets` list, each checked. */
export function parseTargets(raw: string): ServerTarget[] {
  const targets = raw.split(',');
  for (const t of targets) {
    if (t !== 'floor' && !(t in GATEWAY_LABELS)) throw new Error(`--targets: unknown target ${t} (floor or one of ${Object.keys(GATEWAY_LABELS).join(', ')})`);
  }
  return targets as ServerTarget[];
}

/** The target as the tools' headings name it. */
export function targetTitle(target: ServerTarget): string {
  return target === 'floor' ? 'minimal proxy (floor)' : `gateway, ${GATEWAY_LABELS[target]}`;
}

/** Starts the target in front of `upstreamUrl`, with extra node flags. */
export function startTarget(target: ServerTarget, upstreamUrl: string, nodeFlags: readonly string[]): Promise<ChildServer> {
  return target === 'floor' ? startFloorProxy(upstreamUrl, nodeFlags) : startGateway(target, upstreamUrl, nodeFlags);
}
