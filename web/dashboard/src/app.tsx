/**
 * The dashboard shell: sign-in with the master key (kept for the tab), navigation between the
 * pages by URL hash, and whether the gateway has rate limits and budgets at all.
 */
import { useEffect, useState } from 'preact/hooks';
import { ApiError, api, setUnauthorizedHandler, storeKey, storedKey } from './api.ts';
import { Field, FormMessage } from './components/controls.tsx';
import { BudgetsDisabled, BudgetsPage } from './pages/budgets.tsx';
import { ExplainPage } from './pages/explain.tsx';
import { KeysPage } from './pages/keys.tsx';
import { QueuePage } from './pages/queue.tsx';
import { RateLimitsDisabled, RateLimitsPage } from './pages/rate-limits.tsx';
import { UsagePage } from './pages/usage.tsx';

type Page = 'rate-limits' | 'queue' | 'explain' | 'budgets' | 'keys' | 'usage';
/** A feature a gateway can switch off; its pages disappear then. */
type Feature = 'rate-limits' | 'budgets';

const PAGES: ReadonlyArray<{ page: Page; label: string; feature?: Feature }> = [
  { page: 'rate-limits', label: 'Rate limits', feature: 'rate-limits' },
  { page: 'queue', label: 'Queue', feature: 'rate-limits' },
  { page: 'explain', label: 'Explain a request', feature: 'rate-limits' },
  { page: 'budgets', label: 'Budgets', feature: 'budgets' },
  { page: 'keys', label: 'API keys' },
  { page: 'usage', label: 'Usage' },
];

/** The admin route that answers 503 feature_unavailable while a feature is off. */
const FEATURE_ROUTES: Record<Feature, string> = { 'rate-limits': '/admin/rate-limits', budgets: '/admin/budgets' };

type Session = { state: 'checking' } | { state: 'signed-out' } | { state: 'signed-in'; open: boolean };
type FeatureState = 'unknown' | 'enabled' | 'disabled';

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

async function featureState(feature: Feature): Promise<FeatureState> {
  try {
    await api('GET', FEATURE_ROUTES[feature]);
    return 'enabled';
  } catch (err) {
    return err instanceof ApiError && err.featureUnavailable ? 'disabled' : 'enabled';
  }
}

export function App() {
  const [session, setSession] = useState<Session>({ state: 'checking' });
  const [features, setFeatures] = useState<Record<Feature, FeatureState>>({ 'rate-limits': 'unknown', budgets: 'unknown' });
  const disable = (feature: Feature) => setFeatures((current) => ({ ...current, [feature]: 'disabled' }));
  const [hashPage, setHashPage] = useState<Page | undefined>(pageFromHash());
  const [startError, setStartError] = useState<string | undefined>(undefined);

  const signedIn = async (open: boolean) => {
    setSession({ state: 'signed-in', open });
    const [rateLimits, budgets] = await Promise.all([featureState('rate-limits'), featureState('budgets')]);
    setFeatures({ 'rate-limits': rateLimits, budgets });
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

  const visible = PAGES.filter((p) => p.feature === undefined || features[p.feature] !== 'disabled');
  const page = hashPage ?? visible[0]!.page;
  const feature = PAGES.find((p) => p.page === page)?.feature;
  const disabledFeature = feature !== undefined && features[feature] === 'disabled' ? feature : undefined;
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
        {features['rate-limits'] === 'unknown' || features.budgets === 'unknown' ? (
          <p class="muted">Loading…</p>
        ) : disabledFeature === 'rate-limits' ? (
          <RateLimitsDisabled />
        ) : disabledFeature === 'budgets' ? (
          <BudgetsDisabled />
        ) : page === 'rate-limits' ? (
          <RateLimitsPage onDisabled={() => disable('rate-limits')} />
        ) : page === 'queue' ? (
          <QueuePage onDisabled={() => disable('rate-limits')} />
        ) : page === 'explain' ? (
          <ExplainPage onDisabled={() => disable('rate-limits')} />
        ) : page === 'budgets' ? (
          <BudgetsPage onDisabled={() => disable('budgets')} />
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
