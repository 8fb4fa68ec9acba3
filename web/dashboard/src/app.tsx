/**
 * The dashboard shell: sign-in with the master key (kept for the tab), navigation between the
 * pages by URL hash, and whether the gateway has rate limits at all.
 */
import { useEffect, useState } from 'preact/hooks';
import { ApiError, api, setUnauthorizedHandler, storeKey, storedKey } from './api.ts';
import { Field, FormMessage } from './components/controls.tsx';
import { ExplainPage } from './pages/explain.tsx';
import { KeysPage } from './pages/keys.tsx';
import { RateLimitsDisabled, RateLimitsPage } from './pages/rate-limits.tsx';
import { UsagePage } from './pages/usage.tsx';

type Page = 'rate-limits' | 'explain' | 'keys' | 'usage';

const PAGES: ReadonlyArray<{ page: Page; label: string; needsRateLimits: boolean }> = [
  { page: 'rate-limits', label: 'Rate limits', needsRateLimits: true },
  { page: 'explain', label: 'Explain a request', needsRateLimits: true },
  { page: 'keys', label: 'API keys', needsRateLimits: false },
  { page: 'usage', label: 'Usage', needsRateLimits: false },
];

type Session = { state: 'checking' } | { state: 'signed-out' } | { state: 'signed-in'; open: boolean };
type RateLimits = 'unknown' | 'enabled' | 'disabled';

function pageFromHash(): Page | undefined {
  const name = location.hash.replace(/^#\/?/, '');
  return PAGES.find((p) => p.page === name)?.page;
}

/** Whether the gateway accepts `key` (null: no key at all) on the admin API. */
async function accepts(key: string | null): Promise<boolean> {
  try {
    await api('GET', '/admin/api-keys', undefined, key);
    return true;
  } catch (err) {
    if (err instanceof ApiError && err.status === 401) return false;
    throw err;
  }
}

async function rateLimitsState(): Promise<RateLimits> {
  try {
    await api('GET', '/admin/rate-limits');
    return 'enabled';
  } catch (err) {
    return err instanceof ApiError && err.featureUnavailable ? 'disabled' : 'enabled';
  }
}

export function App() {
  const [session, setSession] = useState<Session>({ state: 'checking' });
  const [rateLimits, setRateLimits] = useState<RateLimits>('unknown');
  const [hashPage, setHashPage] = useState<Page | undefined>(pageFromHash());
  const [startError, setStartError] = useState<string | undefined>(undefined);

  const signedIn = async (open: boolean) => {
    setSession({ state: 'signed-in', open });
    setRateLimits(await rateLimitsState());
  };

  useEffect(() => {
    const onHash = () => setHashPage(pageFromHash());
    addEventListener('hashchange', onHash);
    setUnauthorizedHandler(() => {
      storeKey(null);
      setSession({ state: 'signed-out' });
    });
    (async () => {
      const key = storedKey();
      if (key !== null && (await accepts(key))) return signedIn(false);
      storeKey(null);
      // A gateway without a master key (loopback only) opens the admin API to everyone.
      if (await accepts(null)) return signedIn(true);
      setSession({ state: 'signed-out' });
    })().catch((err: unknown) => setStartError(err instanceof Error ? err.message : String(err)));
    return () => removeEventListener('hashchange', onHash);
  }, []);

  if (startError) return <main class="center"><p class="form-error" role="alert">Could not reach the gateway: {startError}</p></main>;
  if (session.state === 'checking') return <main class="center"><p class="muted">Connecting…</p></main>;
  if (session.state === 'signed-out') return <SignIn onSignedIn={() => void signedIn(false)} />;

  const visible = PAGES.filter((p) => !p.needsRateLimits || rateLimits !== 'disabled');
  const page = hashPage ?? visible[0]!.page;
  const disabledPage = PAGES.find((p) => p.page === page)?.needsRateLimits === true && rateLimits === 'disabled';
  const signOut = () => {
    storeKey(null);
    setSession({ state: 'signed-out' });
  };

  return (
    <>
      <a class="skip" href="#main">Skip to content</a>
      <header class="top">
        <span class="brand">Floodgate</span>
        <nav aria-label="Dashboard">
          <ul>
            {visible.map((p) => (
              <li key={p.page}>
                <a href={`#/${p.page}`} aria-current={p.page === page ? 'page' : undefined}>
                  {p.label}
                </a>
              </li>
            ))}
          </ul>
        </nav>
        {!session.open && (
          <button type="button" class="sign-out" onClick={signOut}>
            Sign out
          </button>
        )}
      </header>
      {session.open && (
        <p class="banner" role="note">
          This gateway has no master key: its admin API is open to anyone who can reach it (allowed on a loopback address only).
        </p>
      )}
      <main id="main" tabIndex={-1}>
        {rateLimits === 'unknown' ? (
          <p class="muted">Loading…</p>
        ) : disabledPage ? (
          <RateLimitsDisabled />
        ) : page === 'rate-limits' ? (
          <RateLimitsPage onDisabled={() => setRateLimits('disabled')} />
        ) : page === 'explain' ? (
          <ExplainPage onDisabled={() => setRateLimits('disabled')} />
        ) : page === 'keys' ? (
          <KeysPage />
        ) : (
          <UsagePage />
        )}
      </main>
    </>
  );
}

function SignIn({ onSignedIn }: { onSignedIn: () => void }) {
  const [key, setKey] = useState('');
  const [error, setError] = useState<string | undefined>(undefined);
  const [formError, setFormError] = useState<string | undefined>(undefined);
  const submit = async (event: Event) => {
    event.preventDefault();
    if (key.trim() === '') return setError('Enter the master key.');
    try {
      if (!(await accepts(key))) return setError('The gateway refused this key: the dashboard needs the master key (MASTER_KEY).');
    } catch (err) {
      return setFormError(err instanceof Error ? err.message : String(err));
    }
    storeKey(key);
    onSignedIn();
  };
  return (
    <main class="center">
      <form class="card sign-in" onSubmit={submit} noValidate aria-labelledby="sign-in-title">
        <h1 id="sign-in-title">Floodgate dashboard</h1>
        <p>Sign in with the gateway's master key. It is kept in this tab only, until the tab closes.</p>
        <Field id="master-key" label="Master key" error={error}>
          {(a11y) => <input {...a11y} type="password" value={key} autocomplete="off" autoFocus onInput={(e) => setKey(e.currentTarget.value)} />}
        </Field>
        <FormMessage error={formError} />
        <button type="submit" class="primary">
          Sign in
        </button>
      </form>
    </main>
  );
}
