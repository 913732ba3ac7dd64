/** The typed REST client (openapi-fetch over the generated schema): same origin, session cookie. */
import createClient from "openapi-fetch";
import type { paths } from "./schema";

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

/** Calls checked against the OpenAPI schema: `client.GET("/api/jobs/{job_id}", {params: ...})`. */
export const client = createClient<paths>({
  baseUrl: typeof location === "undefined" ? "http://localhost" : location.origin,
  credentials: "same-origin",
  headers: { Accept: "application/json" },
});

client.use({
  onResponse({ request, response }) {
    // a refused login is the login form's own error; every other 401 means "log in again"
    if (response.status === 401 && new URL(request.url).pathname !== "/api/login") onUnauthorized();
  },
});

type Answer<T> = { data?: T; error?: unknown; response: Response };

/** A call's data, or an ApiError with FastAPI's `detail` when the status is not 2xx. */
export async function ok<T>(call: Promise<Answer<T>>): Promise<T> {
  const { data, error, response } = await call;
  if (!response.ok) {
    const detail = error && typeof error === "object" && "detail" in error ? error.detail : error;
    throw new ApiError(response.status, detail);
  }
  return data as T;
}
