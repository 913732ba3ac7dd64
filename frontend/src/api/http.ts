/** Same-origin REST calls with the session cookie; a 401 anywhere sends the user to login. */

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly detail: unknown,
  ) {
    super(typeof detail === "string" ? detail : `request failed with status ${status}`);
  }
}

let onUnauthorized: () => void = () => {};

/** Register what happens on any 401 (the app routes to the login page). */
export function setUnauthorizedHandler(handler: () => void): void {
  onUnauthorized = handler;
}

/** JSON request to `/api/...`; throws ApiError with FastAPI's `detail` on failure. */
export async function api<T>(path: string, init: { method?: string; body?: unknown } = {}): Promise<T> {
  const response = await fetch(path, {
    method: init.method ?? (init.body === undefined ? "GET" : "POST"),
    credentials: "same-origin",
    headers: init.body === undefined ? { Accept: "application/json" } : { "Content-Type": "application/json", Accept: "application/json" },
    body: init.body === undefined ? undefined : JSON.stringify(init.body),
  });
  const text = await response.text();
  let payload: unknown = null;
  if (text) {
    try {
      payload = JSON.parse(text);
    } catch {
      payload = text;
    }
  }
  if (!response.ok) {
    if (response.status === 401 && path !== "/api/login") onUnauthorized();
    const detail = payload && typeof payload === "object" && "detail" in payload ? payload.detail : payload;
    throw new ApiError(response.status, detail);
  }
  return payload as T;
}
