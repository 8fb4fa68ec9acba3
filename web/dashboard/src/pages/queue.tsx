/**
 * The queue: the requests waiting for capacity in this gateway (X-Floodgate-Max-Wait), by priority
 * and by the rule they wait on, polled every two seconds.
 */
import type { QueueStatus } from '../api.ts';
import { ListTable } from '../components/controls.tsx';
import { useLiveList } from '../components/live-list.ts';
import { PRIORITIES, PRIORITY_LABELS, SCOPE_LABELS, formatNumber } from '../format.ts';

const POLL_MS = 2000;

export function QueuePage({ onDisabled }: { onDisabled: () => void }) {
  const { list: queue, loadError } = useLiveList<QueueStatus>('/admin/queue', POLL_MS, onDisabled);
  return (
    <section aria-labelledby="queue-title">
      <div class="page-head">
        <h1 id="queue-title">Queue</h1>
        <p class="muted live">Live: refreshes every {POLL_MS / 1000} s</p>
      </div>
      <p class="muted">
        Requests that sent <code>X-Floodgate-Max-Wait</code> wait here, in this gateway, instead of taking a 429 at once, until the rule that refused them has
        room or their wait is used up. Other replicas keep queues of their own.
      </p>
      {loadError && <p class="form-error" role="alert">Could not load the queue: {loadError}</p>}
      {queue && (
        <p class="queue-total" role="status" aria-live="polite">
          <strong>{formatNumber(queue.waiting)}</strong> {queue.waiting === 1 ? 'request' : 'requests'} waiting
        </p>
      )}
      <h2>By priority</h2>
      <ListTable
        items={queue === undefined ? undefined : PRIORITIES}
        caption="Waiting requests by priority"
        columns={['Priority', 'Waiting']}
        empty=""
        row={(priority) => (
          <tr key={priority} data-priority={priority}>
            <th scope="row">{PRIORITY_LABELS[priority]}</th>
            <td>{formatNumber(queue!.by_priority[priority])}</td>
          </tr>
        )}
      />
      <h2>By rule</h2>
      <ListTable
        items={queue?.rules}
        caption="Waiting requests by the rule they wait on"
        columns={['Scope', 'Subject', 'Period', 'Waiting']}
        empty="No request is waiting on any rule."
        row={(rule) => (
          <tr key={`${rule.scope} ${rule.subject} ${rule.period_label}`} data-queue-rule={`${rule.scope} ${rule.subject} ${rule.period_label}`}>
            <td>{SCOPE_LABELS[rule.scope]}</td>
            <th scope="row" class="subject">{rule.subject}</th>
            <td>{rule.period_label}</td>
            <td>{formatNumber(rule.waiting)}</td>
          </tr>
        )}
      />
      <p class="muted">A request refused on several targets waits on each of their rules, so it may count under more than one.</p>
    </section>
  );
}
