/**
 * Connection to one kernel: sends the agent with a silent execute, opens the
 * comm, validates what comes back, and sends the agent again after every
 * restart. Nothing is sent to a kernel whose language is not Python.
 *
 * It sends nothing to the kernel on a timer of its own (issue 40): every
 * message to a kernel makes it busy and idle again, which counts as its
 * activity for jupyter_server's and JupyterHub's idle cullers. It speaks on
 * a kernel's event (ready, restarted), a setting's change or a user's
 * action ({@link AgentConnection.requestSample}); whether an idle kernel's
 * process still lives is the server's to say (the monitor reads it, see
 * `GpuMonitor`), not a probe's.
 *
 * The agent's text and the validator of its messages are not part of
 * JupyterLab's start: they come in a chunk of their own
 * (src/agent-chunk.ts, through src/agent-loader.ts), loaded when the first
 * Python kernel connects; the model says `starting` meanwhile.
 */
import type { Kernel, KernelMessage } from '@jupyterlab/services';
import type { IDisposable } from '@lumino/disposable';
import { type IAgentChunk, loadAgent } from './agent-loader';
import type { GpuKernelModel } from './model';
import type { BrowserMessage } from './protocol';
import { COMM_TARGET, PROTOCOL_VERSION } from './protocol-constants';

/** First wait for the agent's hello, doubled on each new attempt (ms). */
const HELLO_TIMEOUT_MS = 10_000;
/** Comm openings before the connection reports the agent as failed. */
const HELLO_ATTEMPTS = 3;

/**
 * Watches one kernel connection on behalf of a {@link GpuKernelModel}.
 */
export class AgentConnection implements IDisposable {
  constructor(options: AgentConnection.IOptions) {
    this._kernel = options.kernel;
    this._model = options.model;
    this._sampleIntervalMs = options.sampleIntervalMs;
    this._provenance = options.provenance ?? false;
    this._onDropped = options.onDropped;
    this._kernel.statusChanged.connect(this._onStatus, this);
    this._kernel.connectionStatusChanged.connect(this._onConnection, this);
    Private.live.connections.add(this);
    Private.live.kernelSlots += 2;
    void this._start();
  }

  /**
   * What the connections of this page hold right now, for leak checks
   * (tests, debugging; read through `GpuMonitor.debugCounts()`).
   */
  static liveCounts(): AgentConnection.ILiveCounts {
    const { connections, comms, ownKernels } = Private.live;
    for (const comm of comms) {
      if (comm.isDisposed) {
        comms.delete(comm);
      }
    }
    for (const kernel of ownKernels) {
      if (kernel.isDisposed) {
        ownKernels.delete(kernel);
      }
    }
    return {
      connections: connections.size,
      comms: comms.size,
      kernelSlots: Private.live.kernelSlots,
      ownKernels: ownKernels.size
    };
  }

  /** The kernel connection this watches. */
  get kernel(): Kernel.IKernelConnection {
    return this._kernel;
  }

  /** Whether disposed. */
  get isDisposed(): boolean {
    return this._isDisposed;
  }

  /** Change the sampler period; forwarded to the agent at once. */
  configure(sampleIntervalMs: number): void {
    this._sampleIntervalMs = sampleIntervalMs;
    this._send({
      protocol: PROTOCOL_VERSION,
      type: 'configure',
      sampleIntervalMs
    });
  }

  /**
   * Turn the recording of allocation stacks on or off (the setting
   * `recordOrigins`); forwarded at once, with a fresh inventory asked for so
   * the panel shows the change without waiting for a cell.
   */
  setProvenance(on: boolean): void {
    if (on === this._provenance) {
      return;
    }
    this._provenance = on;
    this._send({
      protocol: PROTOCOL_VERSION,
      type: 'configure',
      sampleIntervalMs: this._sampleIntervalMs,
      provenance: on
    });
    this.requestInventory();
  }

  /**
   * A user opened a view of this kernel (the gauge's popup, the VRAM panel)
   * and the server cannot read its GPU: ask the agent for a sample (and its
   * list of the GPU's processes) now. Only on a user's action, never on a
   * timer: the request counts as the kernel's activity.
   */
  requestSample(): void {
    if (this._model.status === 'ready') {
      this._send({ protocol: PROTOCOL_VERSION, type: 'sample' });
    }
  }

  /** Ask the agent for an inventory now (ignored while not connected). */
  requestInventory(): void {
    this._send({ protocol: PROTOCOL_VERSION, type: 'inventory' });
  }

  dispose(): void {
    if (this._isDisposed) {
      return;
    }
    this._isDisposed = true;
    this._kernel.statusChanged.disconnect(this._onStatus, this);
    this._kernel.connectionStatusChanged.disconnect(this._onConnection, this);
    Private.live.kernelSlots -= 2;
    Private.live.connections.delete(this);
    this._closeComm();
    this._ownKernel?.dispose();
    this._ownKernel = null;
  }

  private async _start(): Promise<void> {
    let info: KernelMessage.IInfoReply | undefined;
    try {
      info = await this._kernel.info;
    } catch (reason) {
      this._fail(reason);
      return;
    }
    if (this._isDisposed) {
      return;
    }
    const language = info?.language_info?.name ?? '';
    if (language.toLowerCase() !== 'python') {
      this._supported = false;
      this._model.setStatus('unsupported', language || null);
      return;
    }
    this._supported = true;
    await this._inject();
  }

  /**
   * Send the agent and open the comm; at most one attempt in flight per
   * kernel process (a restart starts a new generation and abandons the old
   * attempt, whose future the kernel connection cancels). The first attempt
   * of the page waits for the agent's chunk; an attempt abandoned meanwhile
   * (restart, dispose) sends nothing when it arrives.
   */
  private async _inject(): Promise<void> {
    if (this._injecting || this._isDisposed || !this._supported) {
      return;
    }
    const generation = this._generation;
    this._injecting = true;
    this._needsInject = false;
    this._closeComm();
    if (this._model.status !== 'dead') {
      // A kernel that died keeps saying so until the new agent answers.
      this._model.setStatus('starting');
    }
    try {
      const chunk = await loadAgent().catch(reason => {
        throw new Error(
          `the kernel agent could not be loaded: ${reason instanceof Error ? reason.message : String(reason)}`
        );
      });
      if (this._isDisposed || generation !== this._generation) {
        return;
      }
      this._chunk = chunk;
      const future = this._kernel.requestExecute(
        {
          code: chunk.agentInstallCode(this._sampleIntervalMs),
          silent: true,
          store_history: false,
          user_expressions: { ...chunk.HELLO_EXPRESSION },
          allow_stdin: false,
          stop_on_error: false
        },
        true
      );
      // The shell reply is enough: `done` also waits for the IOPub `idle`,
      // which a websocket that just reconnected (after a restart, through a
      // Kernel Gateway) can miss.
      const reply = await new Promise<KernelMessage.IExecuteReplyMsg>(
        (resolve, reject) => {
          future.onReply = resolve;
          future.done.then(
            done => resolve(done as KernelMessage.IExecuteReplyMsg),
            reject
          );
        }
      );
      if (this._isDisposed || generation !== this._generation) {
        return;
      }
      if (reply.content.status !== 'ok') {
        throw new Error(
          reply.content.status === 'error'
            ? `${reply.content.ename}: ${reply.content.evalue}`
            : `install ${reply.content.status}`
        );
      }
      // The agent's hello, evaluated right after the install: the gauge has
      // the devices now; the comm's hello (and its samples) follow.
      const hello = chunk.helloFromReply(reply.content);
      if (hello) {
        this._model.apply(hello);
      }
      this._openComm();
    } catch (reason) {
      if (!this._isDisposed && generation === this._generation) {
        this._fail(reason);
      }
    } finally {
      if (generation === this._generation) {
        this._injecting = false;
      }
    }
  }

  /**
   * A restart begins: forget the old process and queue the agent for the new
   * one. The kernel connection holds messages sent while restarting and
   * sends them once the new kernel answered `kernel_info`, so this does not
   * wait for an `idle` status — through a Kernel Gateway the new kernel's
   * first status messages can be missed by the reconnecting websocket.
   */
  private _onRestarting(died: boolean): void {
    const generation = ++this._generation;
    this._injecting = false;
    this._needsInject = true;
    this._comm = null;
    this._model.resetKernelState();
    if (died) {
      this._model.setDead('restarting');
    } else {
      this._model.setStatus('restarting');
    }
    // After the kernel connection cleared its state for the restart.
    setTimeout(() => {
      if (generation === this._generation && this._needsInject) {
        void this._inject();
      }
    }, 0);
  }

  /** Open the comm to the agent (after `_inject` loaded the chunk and installed it). */
  private _openComm(attempt = 0): void {
    const chunk = this._chunk;
    if (!chunk) {
      return;
    }
    const comm = this._commKernel().createComm(COMM_TARGET);
    // Not over a subshell (JupyterLab's default for comms since 4.4): the
    // agent then answers on the main shell between cells, never while user
    // code runs, and no subshell thread is started in the kernel for it. It
    // also avoids JupyterLab's unhandled "Canceled future for
    // create_subshell_request" when a restart comes before the subshell.
    Private.disableSubshell(comm);
    this._comm = comm;
    Private.live.comms.add(comm);
    this._watchHello(comm, attempt);
    comm.onMsg = msg => {
      if (comm !== this._comm || this._isDisposed) {
        return;
      }
      const parsed = chunk.parseKernelMessage(msg.content.data);
      if (parsed.ok) {
        if (parsed.message.type === 'hello') {
          this._helloComm = comm;
        }
        this._model.apply(parsed.message);
        if (this._model.deadReason === 'exited') {
          // It was alive after all (a late message): back to normal.
          this._model.setStatus('ready');
        }
      } else {
        this._model.countDropped();
        this._onDropped?.(this._model, parsed.reason);
      }
    };
    comm.onClose = () => {
      Private.live.comms.delete(comm);
      if (comm === this._comm) {
        this._comm = null;
        if (!this._isDisposed && this._model.status === 'ready') {
          // The agent went away (replaced by another version, or its target was
          // unregistered): install again once the kernel is idle.
          this._needsInject = true;
          if (this._kernel.status === 'idle') {
            void this._inject();
          }
        }
      }
    };
    comm.open({
      protocol: PROTOCOL_VERSION,
      type: 'configure',
      sampleIntervalMs: this._sampleIntervalMs,
      provenance: this._provenance
    });
  }

  /**
   * The agent answers every comm_open with `hello`. If none came while the
   * kernel was idle (a message lost by a reconnecting websocket), open the
   * comm again, backing off: 10 s, 20 s, 40 s, then give up.
   */
  private _watchHello(comm: Kernel.IComm, attempt: number): void {
    const delay = HELLO_TIMEOUT_MS * 2 ** attempt;
    const check = () => {
      if (comm !== this._comm || this._isDisposed || this._helloComm === comm) {
        return;
      }
      if (this._kernel.status !== 'idle') {
        // A running cell delays the comm_open legitimately: look again later.
        setTimeout(check, delay);
        return;
      }
      if (attempt + 1 >= HELLO_ATTEMPTS) {
        this._fail(new Error('the kernel agent did not answer'));
        return;
      }
      this._closeComm();
      this._openComm(attempt + 1);
    };
    setTimeout(check, delay);
  }

  /**
   * The connection that carries our comm. JupyterLab lets only the first
   * connection to a kernel handle comms; a notebook that joined a kernel
   * another notebook started has comms disabled, and keeps them disabled after
   * that notebook closes. Then the agent gets a connection of its own (to the
   * kernel); the comm's messages are matched by comm id, so
   * no other connection acts on them.
   */
  private _commKernel(): Kernel.IKernelConnection {
    if (this._kernel.handleComms) {
      return this._kernel;
    }
    if (!this._ownKernel || this._ownKernel.isDisposed) {
      this._ownKernel = this._kernel.clone({ handleComms: true });
      Private.live.ownKernels.add(this._ownKernel);
    }
    return this._ownKernel;
  }

  private _closeComm(): void {
    const comm = this._comm;
    this._comm = null;
    if (comm) {
      Private.live.comms.delete(comm);
    }
    if (comm && !comm.isDisposed) {
      try {
        comm.close();
      } catch {
        // The kernel is gone or restarting: nothing to close.
      }
    }
  }

  private _send(message: BrowserMessage): void {
    const comm = this._comm;
    if (!comm || comm.isDisposed || this._kernel.isDisposed) {
      return;
    }
    try {
      comm.send(message as any);
    } catch {
      // Not connected right now; the agent is configured again on reconnect.
    }
  }

  private _onStatus(_: Kernel.IKernelConnection, status: Kernel.Status): void {
    if (!this._supported) {
      return;
    }
    switch (status) {
      case 'restarting':
        this._onRestarting(false);
        break;
      case 'autorestarting':
        // Only the server's restarter sends it: the kernel process died.
        this._onRestarting(true);
        break;
      case 'dead':
        this._generation++;
        this._injecting = false;
        this._needsInject = true;
        this._comm = null;
        this._model.setStatus('dead');
        break;
      case 'idle':
        if (this._needsInject) {
          void this._inject();
        }
        break;
    }
  }

  private _onConnection(
    _: Kernel.IKernelConnection,
    status: Kernel.ConnectionStatus
  ): void {
    if (status === 'connected' && this._needsInject && this._supported) {
      if (this._kernel.status === 'idle') {
        void this._inject();
      }
    }
  }

  private _fail(reason: unknown): void {
    const text =
      reason instanceof Error ? reason.message : String(reason ?? 'unknown');
    this._model.setStatus('failed', text);
  }

  private _kernel: Kernel.IKernelConnection;
  private _model: GpuKernelModel;
  private _sampleIntervalMs: number;
  private _provenance: boolean;
  private _onDropped?: (model: GpuKernelModel, reason: string) => void;
  private _comm: Kernel.IComm | null = null;
  private _chunk: IAgentChunk | null = null;
  private _supported = false;
  private _injecting = false;
  private _generation = 0;
  private _helloComm: Kernel.IComm | null = null;
  private _ownKernel: Kernel.IKernelConnection | null = null;
  private _needsInject = false;
  private _isDisposed = false;
}

/** AgentConnection statics. */
export namespace AgentConnection {
  /** Constructor options. */
  export interface IOptions {
    /** The kernel to watch. */
    kernel: Kernel.IKernelConnection;
    /** The model to fill. */
    model: GpuKernelModel;
    /** Sampler period, milliseconds. */
    sampleIntervalMs: number;
    /** Record which cell and line allocated live CUDA memory (default false). */
    provenance?: boolean;
    /** Called for each kernel message dropped by validation. */
    onDropped?: (model: GpuKernelModel, reason: string) => void;
  }

  /** What the connections of a page hold, see {@link AgentConnection.liveCounts}. */
  export interface ILiveCounts {
    /** Connections created and not disposed. */
    connections: number;
    /**
     * Comms the connections opened that are still open: not closed by the
     * connection, by the kernel (`comm_close`) or by a restart.
     */
    comms: number;
    /** Slots connected to kernel connection signals and not disconnected. */
    kernelSlots: number;
    /** Extra comm-capable kernel connections (shared kernels), not disposed. */
    ownKernels: number;
  }
}

/** Module-private state. */
namespace Private {
  /** Everything the connections of this page hold. */
  export const live = {
    connections: new Set<AgentConnection>(),
    comms: new Set<Kernel.IComm>(),
    ownKernels: new Set<Kernel.IKernelConnection>(),
    kernelSlots: 0
  };

  /**
   * Keep `comm` on the main shell. `commsOverSubshells` and its enum
   * `CommsOverSubshells` exist since @jupyterlab/services 7.4 (JupyterLab
   * 4.4); before, every comm is on the main shell and there is nothing to
   * set. The enum is not imported: on an older JupyterLab the shared
   * @jupyterlab/services module has no such export, and reading its member
   * would throw at the comm's creation.
   */
  export function disableSubshell(comm: Kernel.IComm): void {
    if ('commsOverSubshells' in comm) {
      (comm as { commsOverSubshells: string }).commsOverSubshells = 'disabled';
    }
  }
}
