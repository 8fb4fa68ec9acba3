/**
 * Managed API keys: create one bound to a user path and with its highest priority (its secret shown
 * once), list, revoke.
 */
import { useEffect, useState } from 'preact/hooks';
import { api, type ApiKey, type Priority } from '../api.ts';
import { ConfirmDialog, Field, FormMessage, ListTable, fieldErrors, type FieldErrors } from '../components/controls.tsx';
import { PRIORITIES, PRIORITY_LABELS, formatUtc } from '../format.ts';

interface CreatedKey extends ApiKey {
  key: string;
}

export function KeysPage() {
  const [keys, setKeys] = useState<ApiKey[] | undefined>(undefined);
  const [loadError, setLoadError] = useState<string | undefined>(undefined);
  const [created, setCreated] = useState<CreatedKey | undefined>(undefined);
  const [revoking, setRevoking] = useState<ApiKey | undefined>(undefined);
  const [notice, setNotice] = useState<string | undefined>(undefined);

  const load = async () => {
    try {
      setKeys((await api<{ api_keys: ApiKey[] }>('GET', '/admin/api-keys')).api_keys);
      setLoadError(undefined);
    } catch (err) {
      setLoadError(err instanceof Error ? err.message : String(err));
    }
  };
  useEffect(() => void load(), []);

  return (
    <section aria-labelledby="keys-title">
      <div class="page-head">
        <h1 id="keys-title">API keys</h1>
        <p class="muted">Managed keys call the model routes. A key bound to a user path is counted and limited as that path.</p>
      </div>
      <p class="notice" role="status">
        {notice ?? ''}
      </p>
      {created && <NewSecret created={created} onDismiss={() => setCreated(undefined)} />}
      <CreateKey
        onCreated={(key) => {
          setCreated(key);
          setNotice(undefined);
          void load();
        }}
      />
      {loadError && <p class="form-error" role="alert">Could not load the keys: {loadError}</p>}
      <KeyTable keys={keys} onRevoke={setRevoking} />
      {revoking && (
        <ConfirmDialog
          title="Revoke key"
          confirm="Revoke key"
          onClose={() => setRevoking(undefined)}
          run={() => api('DELETE', `/admin/api-keys/${encodeURIComponent(revoking.id)}`)}
          onDone={() => {
            setNotice(`Revoked the key "${revoking.name}".`);
            setRevoking(undefined);
            void load();
          }}
        >
          <p>Revoke the key "{revoking.name}"? Requests with it are refused from now on. This cannot be undone.</p>
        </ConfirmDialog>
      )}
    </section>
  );
}

function CreateKey({ onCreated }: { onCreated: (key: CreatedKey) => void }) {
  const [name, setName] = useState('');
  const [userPath, setUserPath] = useState('');
  const [maxPriority, setMaxPriority] = useState<Priority>('normal');
  const [errors, setErrors] = useState<FieldErrors>({});
  const submit = async (event: Event) => {
    event.preventDefault();
    try {
      const body = { name, ...(userPath.trim() !== '' && { user_path: userPath }), max_priority: maxPriority };
      onCreated(await api<CreatedKey>('POST', '/admin/api-keys', body));
      setName('');
      setUserPath('');
      setMaxPriority('normal');
      setErrors({});
    } catch (err) {
      setErrors(fieldErrors(err, { name: 'name', user_path: 'userPath', max_priority: 'maxPriority' }));
    }
  };
  return (
    <form class="card" aria-labelledby="create-key-title" onSubmit={submit} noValidate>
      <h2 id="create-key-title">Create a key</h2>
      <div class="rule-fields">
        <Field id="key-name" label="Name" error={errors.name}>
          {(a11y) => <input {...a11y} type="text" value={name} autocomplete="off" onInput={(e) => setName(e.currentTarget.value)} />}
        </Field>
        <Field id="key-user-path" label="User path (optional)" error={errors.userPath} hint="Requests with this key count as this path; the header is then ignored.">
          {(a11y) => <input {...a11y} type="text" value={userPath} autocomplete="off" spellcheck={false} placeholder="/team/a" onInput={(e) => setUserPath(e.currentTarget.value)} />}
        </Field>
        <Field id="key-max-priority" label="Highest priority" error={errors.maxPriority} hint="A request asking for more (X-Floodgate-Priority) is served at this one.">
          {(a11y) => (
            <select {...a11y} value={maxPriority} onChange={(e) => setMaxPriority(e.currentTarget.value as Priority)}>
              {PRIORITIES.map((value) => (
                <option value={value}>{PRIORITY_LABELS[value]}{value === 'normal' ? ' (default)' : ''}</option>
              ))}
            </select>
          )}
        </Field>
      </div>
      <FormMessage error={errors.form} />
      <button type="submit" class="primary">
        Create key
      </button>
    </form>
  );
}

/** The secret, once: the gateway keeps only its hash, so this is the only time it can be seen. */
function NewSecret({ created, onDismiss }: { created: CreatedKey; onDismiss: () => void }) {
  const [copied, setCopied] = useState<'yes' | 'failed' | undefined>(undefined);
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(created.key);
      setCopied('yes');
    } catch {
      setCopied('failed');
    }
  };
  return (
    <div class="card secret" role="region" aria-labelledby="secret-title">
      <h2 id="secret-title">Key "{created.name}" created</h2>
      <p>
        <strong>Copy the secret now: it is shown only once.</strong> The gateway stores only its hash.
      </p>
      <p class="secret-row">
        <code id="new-secret" class="secret-value">
          {created.key}
        </code>
        <button type="button" onClick={copy} aria-describedby="new-secret">
          {copied === 'yes' ? 'Copied' : 'Copy'}
        </button>
      </p>
      <p class="muted" role="status">
        {copied === 'failed' ? 'The browser refused the clipboard: select the secret and copy it by hand.' : ''}
      </p>
      <button type="button" onClick={onDismiss}>
        I have copied it
      </button>
    </div>
  );
}

function KeyTable({ keys, onRevoke }: { keys: ApiKey[] | undefined; onRevoke: (key: ApiKey) => void }) {
  return (
    <ListTable
      items={keys}
      caption="Managed API keys"
      columns={['Name', 'User path', 'Highest priority', 'Created', 'ID', 'Actions']}
      empty="No managed keys yet."
      row={(key) => (
        <tr key={key.id} data-key={key.id}>
          <th scope="row">{key.name}</th>
          <td>{key.user_path ?? <span class="muted">unbound</span>}</td>
          <td class="priority">{key.max_priority}</td>
          <td>{formatUtc(key.created_at)}</td>
          <td>
            <code>{key.id}</code>
          </td>
          <td class="actions">
            <button type="button" class="danger" aria-label={`Revoke ${key.name}`} onClick={() => onRevoke(key)}>
              Revoke
            </button>
          </td>
        </tr>
      )}
    />
  );
}
