/** Shell: auth gate, header navigation, connection banner, and the routed view. */
import { useEffect, useState } from "preact/hooks";
import { ApiError, client, ok, setUnauthorizedHandler } from "./api/http";
import type { Me } from "./api/types";
import { live, useConnStatus } from "./live";
import { ExecutorBanner } from "./components/ExecutorBanner";
import { RetryNow } from "./components/RetryNow";
import { setThemeChoice, themeChoice, type ThemeChoice } from "./lib/theme";
import { currentPath, Link, navigate, useRoute, type Route } from "./router";
import { BoardView } from "./views/Board";
import { ClusterView } from "./views/Cluster";
import { CompareView } from "./views/Compare";
import { JobView } from "./views/Job";
import { LoginView } from "./views/Login";
import { RunsView } from "./views/Runs";
import { SubmitView } from "./views/Submit";
import { SweepView } from "./views/Sweep";
import { SweepsView } from "./views/Sweeps";
import { UsageView } from "./views/Usage";

function toLogin(): void {
  const here = currentPath();
  if (here.startsWith("/login")) return;
  live.close();
  navigate(`/login?next=${encodeURIComponent(here)}`, { replace: true });
}
setUnauthorizedHandler(toLogin);

export function App() {
  const route = useRoute();
  const [me, setMe] = useState<Me | null>(null);
  const [loadError, setLoadError] = useState<string | null>(null);

  useEffect(() => {
    if (route.name === "login" || me) return;
    // /api/session answers 200 naming nobody when signed out: /api/me's 401 would be
    // logged in the console of the login page it leads to
    ok(client.GET("/api/session"))
      .then(({ user }) => {
        if (!user) return toLogin();
        setMe(user);
        setLoadError(null);
        live.reopen();
      })
      .catch((err: unknown) => {
        if (!(err instanceof ApiError && err.status === 401)) setLoadError(String(err));
      });
  }, [route.name, me]);

  if (route.name === "login") {
    return (
      <LoginView
        next={route.next}
        onLogin={(user) => {
          setMe(user);
          live.reopen();
          navigate(route.next, { replace: true });
        }}
      />
    );
  }
  return (
    <div class="shell">
      <Header me={me} route={route} onLogout={() => setMe(null)} />
      <ConnBanner />
      {me && <ExecutorBanner />}
      <main>
        {loadError && <p class="error">Could not reach the server: {loadError}</p>}
        {me ? <View route={route} me={me} /> : !loadError && <p class="muted">Loading…</p>}
      </main>
    </div>
  );
}

function View({ route, me }: { route: Route; me: Me }) {
  switch (route.name) {
    case "board":
      return <BoardView />;
    case "submit":
      return <SubmitView key={`${route.clone ?? "new"}:${route.fromStep ?? ""}`} clone={route.clone} fromStep={route.fromStep} />;
    case "compare":
      return <CompareView ids={route.ids} />;
    case "job":
      return <JobView key={route.id} id={route.id} />;
    case "cluster":
      return <ClusterView me={me} />;
    case "runs":
      return <RunsView />;
    case "usage":
      return <UsageView />;
    case "sweeps":
      return <SweepsView />;
    case "sweep":
      return <SweepView key={route.id} id={route.id} />;
    default:
      return (
        <section>
          <h1>Not found</h1>
          <p>
            Nothing lives at <code>{route.name === "notfound" ? route.path : ""}</code>. <Link href="/">Back to the board</Link>
          </p>
        </section>
      );
  }
}

/** The main navigation: each link's path, label and the routes it is current for (the first
 * names its test id). */
const NAV: [string, string, Route["name"][]][] = [
  ["/", "Board", ["board"]],
  ["/runs", "Runs", ["runs"]],
  ["/sweeps", "Sweeps", ["sweeps", "sweep"]],
  ["/submit", "Submit", ["submit"]],
  ["/cluster", "Cluster", ["cluster"]],
  ["/compare", "Compare", ["compare"]],
  ["/usage", "Usage", ["usage"]],
];

function Header({ me, route, onLogout }: { me: Me | null; route: Route; onLogout: () => void }) {
  const [theme, setTheme] = useState<ThemeChoice>(themeChoice());
  const logout = async () => {
    try {
      await ok(client.POST("/api/logout"));
    } finally {
      live.close();
      onLogout();
      navigate("/login", { replace: true });
    }
  };
  const nextTheme: Record<ThemeChoice, ThemeChoice> = { auto: "dark", dark: "light", light: "auto" };
  return (
    <header class="topbar">
      <Link href="/" class="brand">
        Trainboard
      </Link>
      <nav aria-label="Main">
        {NAV.map(([href, label, names]) => (
          <Link key={href} href={href} data-testid={`nav-${names[0]}`} aria-current={names.some((n) => route.name === n) ? "page" : undefined}>
            {label}
          </Link>
        ))}
      </nav>
      <span class="spacer" />
      <button
        type="button"
        class="ghost"
        data-testid="theme-toggle"
        title="Theme: auto follows your system"
        onClick={() => {
          const next = nextTheme[theme];
          setThemeChoice(next);
          setTheme(next);
        }}
      >
        Theme: {theme}
      </button>
      {me && (
        <span class="user" data-testid="current-user">
          {me.username}
          {me.role === "admin" ? " (admin)" : ""}
        </span>
      )}
      {me && (
        <button type="button" class="ghost" data-testid="logout" onClick={logout}>
          Log out
        </button>
      )}
    </header>
  );
}

function ConnBanner() {
  const status = useConnStatus();
  if (status !== "reconnecting") return null;
  return (
    <div class="conn-banner" role="status" data-testid="conn-banner">
      Connection lost — reconnecting… <RetryNow />
    </div>
  );
}
