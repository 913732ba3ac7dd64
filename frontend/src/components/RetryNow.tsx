/** "Retry now" in the connection banner: reconnect at once instead of after the back-off. */
import { retryNow } from "../live";

export function RetryNow() {
  return (
    <button type="button" class="ghost" data-testid="conn-retry" onClick={retryNow}>
      Retry now
    </button>
  );
}
