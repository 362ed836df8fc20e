/**
 * This server's kernels and their pids, from the server extension's
 * `GET {baseUrl}gpu-hygiene/kernels` (jupyterlab_gpu_hygiene/server.py):
 * one fetch (validated by server-kernels-schema.ts, a chunk of its own loaded
 * with the first answer: zod stays off JupyterLab's start path), and
 * {@link ServerKernels}, which keeps
 * the last answer for the monitor and fetches again only when it is old.
 *
 * The answer is what lets the browser say which of the pids NVML lists on a
 * GPU are the user's own kernels, and which notebook each one runs.
 */
import { ServerConnection } from '@jupyterlab/services';
import type { IDisposable } from '@lumino/disposable';
import { ISignal, Signal } from '@lumino/signaling';
import type {
  IServerKernelsAnswer,
  ServerKernelsParse,
  ServerKernelsState
} from './server-kernel-types';

/** The endpoint, under the server's base URL. */
export const SERVER_KERNELS_ROUTE = 'gpu-hygiene/kernels';

/** Age (ms) below which a `gpuProcesses` message does not fetch the answer again. */
export const SERVER_KERNELS_MAX_AGE_MS = 5000;

/**
 * Age (ms) below which a server without the endpoint (404) is not asked again
 * on a `gpuProcesses` message; opening the panel always asks.
 */
export const SERVER_KERNELS_MISSING_MAX_AGE_MS = 60_000;

/** The endpoint's URL under `baseUrl` (which may or may not end with `/`). */
export function serverKernelsUrl(baseUrl: string): string {
  return `${baseUrl.replace(/\/+$/, '')}/${SERVER_KERNELS_ROUTE}`;
}

/**
 * Ask the server for its kernels once, with the app's server settings (its
 * token and XSRF cookie). Never throws and logs nothing: every outcome is a
 * {@link ServerKernelsState}.
 *
 * @param now - the clock (ms since the epoch), for `at`.
 */
export async function fetchServerKernels(
  settings: ServerConnection.ISettings,
  now: () => number = Date.now
): Promise<ServerKernelsState> {
  let response: Response;
  try {
    response = await ServerConnection.makeRequest(
      serverKernelsUrl(settings.baseUrl),
      { method: 'GET' },
      settings
    );
  } catch (reason) {
    return {
      status: 'error',
      reason: 'network',
      detail: reason instanceof Error ? reason.message : String(reason),
      at: now()
    };
  }
  if (response.status === 404) {
    return { status: 'missing', at: now() };
  }
  if (!response.ok) {
    return {
      status: 'error',
      reason: 'http',
      detail: `${response.status} ${response.statusText}`.trim(),
      at: now()
    };
  }
  let data: unknown;
  try {
    data = await response.json();
  } catch (reason) {
    return {
      status: 'error',
      reason: 'invalid',
      detail: reason instanceof Error ? reason.message : String(reason),
      at: now()
    };
  }
  let parsed: ServerKernelsParse;
  try {
    const { parseServerKernels } = await import('./server-kernels-schema');
    parsed = parseServerKernels(data);
  } catch (reason) {
    return {
      status: 'error',
      reason: 'invalid',
      detail: `validator not loaded: ${reason instanceof Error ? reason.message : String(reason)}`,
      at: now()
    };
  }
  return parsed.ok
    ? { status: 'ok', answer: parsed.answer, at: now() }
    : { status: 'error', reason: 'invalid', detail: parsed.reason, at: now() };
}

/**
 * The last answer of the server's kernel list, fetched on demand: at most
 * one request in flight, and none while the last attempt is younger than
 * the age asked for. `changed` is emitted when the state changes (not for an
 * answer equal to the previous one).
 */
export class ServerKernels implements IDisposable {
  constructor(options: ServerKernels.IOptions = {}) {
    this._settings = options.serverSettings ?? null;
    this._now = options.now ?? Date.now;
    this._fetch = options.fetch ?? fetchServerKernels;
  }

  /** The current state (`none` before the first answer). */
  get state(): ServerKernelsState {
    return this._state;
  }

  /** The last valid answer, or null (not asked yet, 404, or an error since). */
  get answer(): IServerKernelsAnswer | null {
    return this._state.status === 'ok' ? this._state.answer : null;
  }

  /** Emitted with the new state when it changed. */
  get changed(): ISignal<this, ServerKernelsState> {
    return this._changed;
  }

  get isDisposed(): boolean {
    return this._isDisposed;
  }

  /**
   * Fetch the answer again unless the last attempt is younger than
   * `maxAgeMs` (a 404 counts as young for
   * {@link SERVER_KERNELS_MISSING_MAX_AGE_MS} unless `maxAgeMs` is 0) or a
   * request is already in flight.
   *
   * @returns the state after the fetch (or the current one). Never rejects.
   */
  refresh(maxAgeMs = SERVER_KERNELS_MAX_AGE_MS): Promise<ServerKernelsState> {
    if (this._inFlight) {
      return this._inFlight;
    }
    const state = this._state;
    if (this._isDisposed || !this._settings) {
      return Promise.resolve(state);
    }
    if (state.status !== 'none') {
      const age = this._now() - state.at;
      const limit =
        state.status === 'missing' && maxAgeMs > 0
          ? Math.max(maxAgeMs, SERVER_KERNELS_MISSING_MAX_AGE_MS)
          : maxAgeMs;
      if (age >= 0 && age < limit) {
        return Promise.resolve(state);
      }
    }
    const request = this._fetch(this._settings, this._now).then(next => {
      this._inFlight = null;
      if (!this._isDisposed) {
        this._set(next);
      }
      return this._state;
    });
    this._inFlight = request;
    return request;
  }

  dispose(): void {
    if (this._isDisposed) {
      return;
    }
    this._isDisposed = true;
    Signal.clearData(this);
  }

  private _set(next: ServerKernelsState): void {
    const same =
      Private.key(next) === Private.key(this._state) && next.status !== 'none';
    this._state = next;
    if (!same) {
      this._changed.emit(next);
    }
  }

  private _settings: ServerConnection.ISettings | null;
  private _now: () => number;
  private _fetch: typeof fetchServerKernels;
  private _state: ServerKernelsState = { status: 'none' };
  private _inFlight: Promise<ServerKernelsState> | null = null;
  private _isDisposed = false;
  private _changed = new Signal<this, ServerKernelsState>(this);
}

/** ServerKernels statics. */
export namespace ServerKernels {
  /** Constructor options. */
  export interface IOptions {
    /** The app's server settings; without them nothing is fetched (state stays `none`). */
    serverSettings?: ServerConnection.ISettings;
    /** The clock, ms since the epoch (tests). */
    now?: () => number;
    /** The fetch (tests; default {@link fetchServerKernels}). */
    fetch?: typeof fetchServerKernels;
  }
}

/** Module-private helpers. */
namespace Private {
  /** What a state says, without when: two equal answers give the same key. */
  export function key(state: ServerKernelsState): string {
    switch (state.status) {
      case 'ok':
        return `ok:${JSON.stringify(state.answer)}`;
      case 'error':
        return `error:${state.reason}:${state.detail}`;
      default:
        return state.status;
    }
  }
}
