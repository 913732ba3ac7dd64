/**
 * A job's own environment variables as typed in the submit form ("NAME=value" per line), checked
 * by the same rules and with the same messages as the server (workers/contract/user_env.py).
 */
export const MAX_ENV_VARS = 64;
const MAX_ENV_NAME = 128;
const MAX_ENV_VALUE = 4096;
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
const RESERVED = new Set([
  "RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE", "MASTER_ADDR",
  "MASTER_PORT", "CUDA_VISIBLE_DEVICES", "PATH", "HOME", "BASH_ENV", "ENV", "IFS", "NODE_OPTIONS", "GCONV_PATH",
  "GLIBC_TUNABLES",
]);
const RESERVED_PREFIXES = ["TRAINBOARD_", "TORCHELASTIC_", "ROLE_", "LD_", "PYTHON", "PERL5", "MALLOC_"];

/** Python's repr of a plain string, as the server's messages quote names. */
const quoted = (text: string) => (text.includes("'") && !text.includes('"') ? `"${text}"` : `'${text.replace(/'/g, "\\'")}'`);

/** Why the server refuses this variable name (user_env.env_name_problem), or null. */
export function envNameProblem(name: string): string | null {
  if (name.length < 1 || name.length > MAX_ENV_NAME || !ENV_NAME.test(name)) {
    return `variable ${quoted(name.slice(0, 70))} must be 1-${MAX_ENV_NAME} letters, digits and _, not starting with a digit`;
  }
  if (RESERVED.has(name) || RESERVED_PREFIXES.some((p) => name.startsWith(p))) {
    return (
      `variable ${quoted(name)} is reserved: Trainboard, torchrun, the loader or the interpreter set or read it ` +
      "(TRAINBOARD_*, RANK, MASTER_*, CUDA_VISIBLE_DEVICES, LD_*, PYTHON*, PATH, HOME, ...)"
    );
  }
  return null;
}

/** The variables of the text, or the first problem (as the server would name it). */
export function parseEnv(text: string): { env: Record<string, string>; problem: string | null } {
  const env: Record<string, string> = {};
  const lines = text.split(/\r?\n/);
  for (const [i, raw] of lines.entries()) {
    const line = raw.trim();
    if (!line || line.startsWith("#")) continue;
    const at = line.indexOf("=");
    if (at < 0) return { env, problem: `line ${i + 1}: write NAME=value` };
    const name = line.slice(0, at).trim();
    const value = raw.slice(raw.indexOf("=") + 1);
    const problem = envNameProblem(name);
    if (problem) return { env, problem };
    if (name in env) return { env, problem: `variable ${quoted(name)} is given twice` };
    if (value.length > MAX_ENV_VALUE) return { env, problem: `variable ${quoted(name)}: value longer than ${MAX_ENV_VALUE} characters` };
    if (value.includes("\0")) return { env, problem: `variable ${quoted(name)}: value must not contain NUL bytes` };
    env[name] = value;
  }
  if (Object.keys(env).length > MAX_ENV_VARS) return { env, problem: `at most ${MAX_ENV_VARS} variables` };
  return { env, problem: null };
}

/** Variables → the text parseEnv reads back (a cloned job's env in the form). */
export function formatEnv(env: Record<string, string> | undefined | null): string {
  return Object.entries(env ?? {})
    .map(([k, v]) => `${k}=${v}`)
    .join("\n");
}
