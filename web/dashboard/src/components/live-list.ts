/**
 * A list from the admin API kept live: polled every `pollMs` (skipped while the tab is hidden), with
 * a tick every second for countdowns on the gateway's clock (when the answer carries `server_time`).
 * Shared by the rate-limit, queue and budget pages.
 */
import { useEffect, useRef, useState } from 'preact/hooks';
import { ApiError, api } from '../api.ts';

export interface LiveList<T> {
  list: T | undefined;
  loadError: string | undefined;
  /** The gateway's clock now, in ms (the browser's, shifted by how far the server's differs). */
  nowMs: number;
  /** Shows an answer the page already has (a PUT or DELETE answers the whole list). */
  show(next: T): void;
  /** Reads the list again now. */
  refresh(): Promise<void>;
}

export function useLiveList<T extends object>(path: string, pollMs: number, onDisabled: () => void): LiveList<T> {
  const [list, setList] = useState<T | undefined>(undefined);
  const [loadError, setLoadError] = useState<string | undefined>(undefined);
  /** Server clock minus this browser's, so countdowns follow the gateway's windows. */
  const [offsetMs, setOffsetMs] = useState(0);
  /** Ticks every second to re-render the countdowns. */
  const [, setTick] = useState(0);
  const loading = useRef(false);

  const show = (next: T) => {
    setList(next);
    if ('server_time' in next && typeof next.server_time === 'string') setOffsetMs(Date.parse(next.server_time) - Date.now());
    setLoadError(undefined);
  };

  const refresh = async () => {
    if (loading.current || document.hidden) return;
    loading.current = true;
    try {
      show(await api<T>('GET', path));
    } catch (err) {
      if (err instanceof ApiError && err.featureUnavailable) onDisabled();
      else setLoadError(err instanceof Error ? err.message : String(err));
    } finally {
      loading.current = false;
    }
  };

  useEffect(() => {
    void refresh();
    const poll = setInterval(() => void refresh(), pollMs);
    const tick = setInterval(() => setTick((n) => n + 1), 1000);
    return () => {
      clearInterval(poll);
      clearInterval(tick);
    };
  }, []);

  return { list, loadError, nowMs: Date.now() + offsetMs, show, refresh };
}
