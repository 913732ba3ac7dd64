/** Token login: POST /api/login sets the session cookie. */
import { useState } from "preact/hooks";
import { api, ApiError } from "../api/http";
import type { Me } from "../api/types";

export function LoginView({ onLogin }: { next: string; onLogin: (me: Me) => void }) {
  const [token, setToken] = useState("");
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);

  const submit = async (event: Event) => {
    event.preventDefault();
    setBusy(true);
    setError(null);
    try {
      await api("/api/login", { body: { token: token.trim() } });
      onLogin(await api<Me>("/api/me"));
    } catch (err) {
      setError(err instanceof ApiError && err.status === 401 ? "That token was not accepted." : String(err));
    } finally {
      setBusy(false);
    }
  };

  return (
    <main class="login">
      <form class="panel" onSubmit={submit}>
        <h1>Trainboard</h1>
        <label for="login-token">Access token</label>
        <input
          id="login-token"
          type="password"
          autocomplete="current-password"
          data-testid="login-token"
          value={token}
          onInput={(e) => setToken(e.currentTarget.value)}
          autofocus
          required
        />
        <p class="muted small">
          <code>trainboard up</code> prints a token when it starts.
        </p>
        {error && (
          <p class="error" role="alert" data-testid="login-error">
            {error}
          </p>
        )}
        <button type="submit" data-testid="login-submit" disabled={busy}>
          {busy ? "Signing in…" : "Sign in"}
        </button>
      </form>
    </main>
  );
}
