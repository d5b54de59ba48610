// The console's entry: sign-in, routing (`/` and `/sessions/{id}`), the connection state.
import { html, render, useState, useEffect, Link, ErrorNote } from './ui.mjs';
import { auth, get, socket, ApiError } from './api.mjs';
import { SessionList } from './list.mjs';
import { TreeView } from './tree.mjs';

function SignIn({ onSignedIn }) {
  const [token, setToken] = useState('');
  const [error, setError] = useState(null);
  const submit = async (e) => {
    e.preventDefault();
    auth.set(token.trim());
    try {
      await get('/v1/sessions?limit=1');
      onSignedIn();
    } catch (err) {
      auth.clear();
      setError(err instanceof ApiError && err.status === 401 ? new Error('That token is not valid.') : err);
    }
  };
  return html`<main class="signin"><form onSubmit=${submit} aria-label="Sign in">
    <h1>muster</h1>
    <p>Sign in with your token (the one <code>make run</code> prints).</p>
    <label for="token">Token</label>
    <input id="token" type="password" autocomplete="current-password" value=${token} onInput=${(e) => setToken(e.target.value)} required />
    <button class="primary" type="submit">Sign in</button>
    <${ErrorNote} error=${error} />
  </form></main>`;
}

function useLocation() {
  const [loc, setLoc] = useState(location.pathname + location.search);
  useEffect(() => {
    const update = () => setLoc(location.pathname + location.search);
    window.addEventListener('popstate', update);
    window.addEventListener('muster:navigate', update);
    return () => { window.removeEventListener('popstate', update); window.removeEventListener('muster:navigate', update); };
  }, []);
  return loc;
}

function App() {
  const [signedIn, setSignedIn] = useState(!!auth.token());
  const [conn, setConn] = useState(socket.state);
  const loc = useLocation();
  useEffect(() => {
    const out = () => setSignedIn(false);
    window.addEventListener('muster:signed-out', out);
    return () => window.removeEventListener('muster:signed-out', out);
  }, []);
  useEffect(() => socket.onState(setConn), []);
  useEffect(() => { if (signedIn) socket.connect(); }, [signedIn]);
  if (!signedIn) return html`<${SignIn} onSignedIn=${() => setSignedIn(true)} />`;
  const url = new URL(loc, location.origin);
  const match = url.pathname.match(/^\/sessions\/([^/]+)$/);
  const signOut = () => { auth.clear(); socket.close(); setSignedIn(false); };
  return html`<div class="app">
    <header class="topbar">
      <${Link} href="/" class="brand">muster</${Link}>
      <span class=${'conn conn-' + conn} role="status" aria-label=${'connection ' + conn}>${conn === 'open' ? 'live' : conn}</span>
      <button class="link" onClick=${signOut}>Sign out</button>
    </header>
    ${match ? html`<${TreeView} key=${match[1]} sessionId=${decodeURIComponent(match[1])} tab=${url.searchParams.get('tab')} />` : html`<${SessionList} />`}
  </div>`;
}

render(html`<${App} />`, document.getElementById('app'));
window.musterConsole = { socket }; // for the browser tests and the benchmark (no token in it)
