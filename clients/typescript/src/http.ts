import { AxError } from "./errors.js";

/** How a Client or a Worker reaches the API. */
export interface ConnectOptions {
  /**
   * The API's base URLs: one, several servers of one region (tried in turn
   * when one is unreachable or answers 503), or a comma-separated list;
   * default $AX_URL.
   */
  urls?: string | string[];
  /** The bearer token (a worker token for a Worker); default $AX_TOKEN. */
  token?: string;
  /** Extra tries after a 429, a 503 or a connection error; default 4. */
  retries?: number;
  /** Each request's timeout in milliseconds; default 30 000. */
  timeoutMs?: number;
  /** The fetch to use; default the global one. */
  fetch?: typeof fetch;
  /** Told each retry and each move to the next URL; default silent (a Worker logs them). */
  log?: (message: string) => void;
}

/** One call's options. */
export interface CallOptions {
  body?: unknown;
  query?: Record<string, string | number | boolean | undefined | null>;
  signal?: AbortSignal;
  timeoutMs?: number;
  retries?: number;
  /**
   * The request may be sent again after a connection error that could have
   * come after the server received it. A request that was never sent (refused,
   * no route, no such host) and a 429 or 503 answer are retried regardless:
   * those never changed anything.
   */
  idempotent?: boolean;
}

const backoffBaseMs = 100;
const backoffCapMs = 5_000;

/**
 * The wait before try attempt+1 (attempt counts from 0): exponential from
 * 100 ms to 5 s, jittered over its upper half; when the server said how long
 * (Retry-After), that long plus up to 10 % (at most 1 s), so that the clients
 * it told the same thing do not come back in one burst.
 */
export function backoff(attempt: number, retryAfterMs?: number, random: () => number = Math.random): number {
  if (retryAfterMs !== undefined && retryAfterMs > 0) {
    return retryAfterMs + random() * Math.min(1_000, retryAfterMs * 0.1);
  }
  const exp = Math.min(backoffCapMs, backoffBaseMs * 2 ** Math.min(attempt, 16));
  return exp / 2 + (random() * exp) / 2;
}

/** Parses Retry-After: delta seconds or an HTTP date. */
export function parseRetryAfter(v: string | null, now = Date.now()): number | undefined {
  if (!v) return undefined;
  if (/^\d+$/.test(v.trim())) return Number(v.trim()) * 1000;
  const t = Date.parse(v);
  return Number.isNaN(t) ? undefined : Math.max(0, t - now);
}

/** Resolves after ms, or rejects with the signal's reason when it aborts first. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const done = () => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    };
    const t = setTimeout(done, ms);
    const onAbort = () => {
      clearTimeout(t);
      reject(signal!.reason);
    };
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

// Connection errors that mean the request never left: retrying cannot repeat it.
const notSentCodes = new Set(["ECONNREFUSED", "ENOTFOUND", "EAI_AGAIN", "EHOSTUNREACH", "ENETUNREACH", "UND_ERR_CONNECT_TIMEOUT"]);

function errCode(err: unknown): string {
  for (let e: unknown = err, i = 0; e && i < 4; e = (e as { cause?: unknown }).cause, i++) {
    const c = (e as { code?: unknown }).code;
    if (typeof c === "string") return c;
  }
  return "";
}

function describe(err: unknown): string {
  const code = errCode(err);
  const msg = err instanceof Error ? err.message : String(err);
  return code ? `${msg} (${code})` : msg;
}

/**
 * Transport sends JSON requests to the API, retrying 429, 503 and connection
 * errors with backoff and jitter, and moving to the next URL on a connection
 * error or a 503. Shared by a Client and a Worker; safe for concurrent calls.
 */
export class Transport {
  readonly #urls: string[];
  #current = 0;
  readonly #token: string | undefined;
  readonly #retries: number;
  readonly #timeoutMs: number;
  readonly #fetch: typeof fetch;
  readonly #log: ((message: string) => void) | undefined;

  constructor(o: ConnectOptions) {
    const given = o.urls ?? process.env.AX_URL ?? "";
    const urls = (Array.isArray(given) ? given : given.split(","))
      .map((u) => u.trim().replace(/\/+$/, ""))
      .filter((u) => u !== "");
    if (urls.length === 0 || urls.some((u) => !/^https?:\/\/./.test(u))) {
      throw new TypeError(`ax: urls (or $AX_URL) must be http(s) URLs, got ${JSON.stringify(given)}`);
    }
    this.#urls = urls;
    this.#token = o.token ?? (process.env.AX_TOKEN || undefined);
    this.#retries = o.retries ?? 4;
    this.#timeoutMs = o.timeoutMs ?? 30_000;
    this.#fetch = o.fetch ?? globalThis.fetch.bind(globalThis);
    this.#log = o.log;
  }

  /** The URL requests go to now. */
  get url(): string {
    return this.#urls[this.#current]!;
  }

  #rotate(from: string, why: string): void {
    // Only the first of several concurrent failures on one URL moves on.
    if (this.#urls[this.#current] !== from || this.#urls.length === 1) return;
    this.#current = (this.#current + 1) % this.#urls.length;
    this.#log?.(`${from}: ${why}; moving to ${this.url}`);
  }

  /** Sends one request; resolves to the answer's JSON (undefined for an empty body), throws AxError. */
  async call<T>(method: string, path: string, o: CallOptions = {}): Promise<T> {
    const retries = o.retries ?? this.#retries;
    const headers: Record<string, string> = { accept: "application/json" };
    if (this.#token) headers.authorization = `Bearer ${this.#token}`;
    let body: string | undefined;
    if (o.body !== undefined) {
      body = JSON.stringify(o.body);
      headers["content-type"] = "application/json";
    }
    const qs = query(o.query);
    for (let attempt = 0; ; attempt++) {
      const base = this.url;
      const signals = [AbortSignal.timeout(o.timeoutMs ?? this.#timeoutMs)];
      if (o.signal) signals.push(o.signal);
      let res: Response;
      let text: string;
      try {
        res = await this.#fetch(base + path + qs, { method, headers, body, signal: AbortSignal.any(signals) });
        text = await res.text();
      } catch (err) {
        if (o.signal?.aborted) throw o.signal.reason;
        const e = new AxError({ status: 0, code: "unavailable", message: `${method} ${base}${path}: ${describe(err)}`, cause: err });
        const sent = !notSentCodes.has(errCode(err));
        if (attempt >= retries || (sent && !o.idempotent)) throw e;
        this.#rotate(base, describe(err));
        const wait = backoff(attempt);
        if (attempt % 10 === 0) this.#log?.(`${method} ${path}: ${e.message}; retrying in ${Math.round(wait)} ms`);
        await sleep(wait, o.signal);
        continue;
      }
      if (res.ok) return (text ? JSON.parse(text) : undefined) as T;
      const e = decodeError(res, text);
      if ((res.status === 429 || res.status === 503) && attempt < retries) {
        if (res.status === 503) this.#rotate(base, `503 ${e.code}`);
        const wait = backoff(attempt, e.retryAfterMs);
        if (attempt % 10 === 0) this.#log?.(`${method} ${path}: ${res.status} ${e.code}: ${e.message}; retrying in ${Math.round(wait)} ms`);
        await sleep(wait, o.signal);
        continue;
      }
      throw e;
    }
  }
}

function query(q: CallOptions["query"]): string {
  if (!q) return "";
  const p = new URLSearchParams();
  for (const [k, v] of Object.entries(q)) {
    if (v !== undefined && v !== null && v !== "") p.append(k, String(v));
  }
  const s = p.toString();
  return s ? "?" + s : "";
}

function decodeError(res: Response, text: string): AxError {
  let retryAfterMs = parseRetryAfter(res.headers.get("retry-after"));
  try {
    const e = (JSON.parse(text) as { error?: { code?: string; message?: string; field?: string; retry_after_seconds?: number } }).error;
    if (e && typeof e.code === "string") {
      if (retryAfterMs === undefined && typeof e.retry_after_seconds === "number") retryAfterMs = e.retry_after_seconds * 1000;
      return new AxError({ status: res.status, code: e.code, message: e.message ?? "", field: e.field, retryAfterMs });
    }
  } catch {
    // not the API's error shape: reported below with the start of the body
  }
  return new AxError({ status: res.status, code: `http_${res.status}`, message: text.slice(0, 200) || res.statusText, retryAfterMs });
}

/** Escapes one path segment. */
export function seg(s: string): string {
  return encodeURIComponent(s);
}
