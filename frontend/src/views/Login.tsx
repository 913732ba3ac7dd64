/** Login by access token or by username and password: POST /api/login sets the session cookie. */
import { useState } from "preact/hooks";
import { ApiError, client, ok } from "../api/http";
import type { Me } from "../api/types";

type Mode = "token" | "password";

export function LoginView({ onLogin }: { next: string; onLogin: (me: Me) => void }) {
  const [mode, setMode] = useState<Mode>("token");
  const [token, setToken] = useState("");
  const [username, setUsername] = useState("");
  const [password, setPassword] = useState("");
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);

  const submit = async (event: Event) => {
    event.preventDefault();
    setBusy(true);
    setError(null);
    try {
      const body = mode === "token" ? { token: token.trim() } : { username: username.trim(), password };
      await ok(client.POST("/api/login", { body }));
      onLogin(await ok(client.GET("/api/me")));
    } catch (err) {
      const refused = err instanceof ApiError && (err.status === 401 || err.status === 403);
      setError(refused ? (mode === "token" ? "That token was not accepted." : "Wrong username or password.") : String(err));
    } finally {
      setBusy(false);
    }
  };

  return (
    <main class="login">
      <form class="panel" onSubmit={submit}>
        <h1>Trainboard</h1>
        <div class="tabs" role="tablist" aria-label="How to sign in">
          {(["token", "password"] as const).map((m) => (
            <button
              type="button"
              role="tab"
              aria-selected={mode === m}
              class={mode === m ? "" : "secondary"}
              data-testid={`login-mode-${m}`}
              onClick={() => (setMode(m), setError(null))}
            >
              {m === "token" ? "Access token" : "Username & password"}
            </button>
          ))}
        </div>
        {mode === "token" ? (
          <>
            <label for="login-token">Access token</label>
            <Secret id="login-token" value={token} set={setToken} autofocus />
            <p class="muted small">
              <code>trainboard up</code> prints a token when it starts.
            </p>
          </>
        ) : (
          <>
            <label for="login-username">Username</label>
            <input id="login-username" autocomplete="username" data-testid="login-username" value={username} onInput={(e) => setUsername(e.currentTarget.value)} required />
            <label for="login-password">Password</label>
            <Secret id="login-password" value={password} set={setPassword} />
          </>
        )}
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

/** A required password-type field whose test id is its id. */
function Secret(props: { id: string; value: string; set: (value: string) => void; autofocus?: boolean }) {
  return (
    <input
      id={props.id}
      type="password"
      autocomplete="current-password"
      data-testid={props.id}
      value={props.value}
      onInput={(e) => props.set(e.currentTarget.value)}
      autofocus={props.autofocus}
      required
    />
  );
}
