/**
 * Graph holders: user variables that keep autograd graphs alive — the
 * `losses.append(loss)` leak (case C08). Each tensor with a `grad_fn` keeps
 * the activations saved for its backward pass, often hundreds of MiB per
 * step. The fix is to store `loss.item()` or `loss.detach()`, or to run
 * evaluation under `torch.no_grad()`.
 *
 * The warning rule: a graph holder is worth a toast when the graphs it keeps
 * hold at least {@link GRAPH_WARN_BYTES} on one CUDA device (the agent's
 * estimate, a lower bound when its node walk was cut). Smaller ones are only
 * listed in the VRAM panel: a few scalar losses with tiny graphs are common
 * and harmless, and the leak trend flags a steady climb of any size.
 */
import type { IGraphHolder, IInventory } from '../../protocol';
import {
  commentLines,
  HELD_CHECK,
  helperHead,
  isPythonIdentifier,
  pyHeld
} from '../python';
import { formatBytes, isCudaDevice, sumBytes } from '../format';

/** Bytes on one CUDA device from which a graph holder raises a toast (64 MiB). */
export const GRAPH_WARN_BYTES = 64 * 2 ** 20;

/**
 * Estimated bytes (all devices) from which a graph holder is offered "Fix…"
 * and is a finding (1 MiB): below it, a few scalar losses with tiny graphs,
 * it is only listed in the VRAM panel.
 */
export const GRAPH_FIX_MIN_BYTES = 2 ** 20;

/** Marker comment of the cell inserted by the graph holders' "Fix…" action. */
export const DETACH_MARKER = '# gpu-hygiene: detach_graphs';

/** One graph holder for display. */
export interface IGraphRow {
  /** The holder as the agent reported it. */
  graph: IGraphHolder;
  /** Estimated bytes on CUDA devices (a lower bound when `graph.truncated`). */
  cudaBytes: number;
  /** Estimated bytes on all devices. */
  bytes: number;
  /** The CUDA device holding the most, e.g. `cuda:0`, or null. */
  device: string | null;
  /** Bytes on that device. */
  deviceBytes: number;
  /**
   * Whether the "Fix…" action is offered: it may insert code for it
   * ({@link canFixGraph}) and the graphs keep at least
   * {@link GRAPH_FIX_MIN_BYTES}.
   */
  fixable: boolean;
}

/** The CUDA device where a graph holder keeps the most bytes, and how many. */
export function largestCudaDevice(perDevice: Record<string, number>): {
  device: string | null;
  bytes: number;
} {
  let device: string | null = null;
  let bytes = 0;
  for (const [name, value] of Object.entries(perDevice)) {
    if (isCudaDevice(name) && value > bytes) {
      device = name;
      bytes = value;
    }
  }
  return { device, bytes };
}

/** `hex(id())` as the agent writes it: the only form of an id that reaches code. */
const VALUE_ID = /^0x[0-9a-f]{1,16}$/;

/**
 * What the Fix… cell can act on: a tensor, or a plain container whose
 * tensors are its direct items (agent 0.12.0 names any other object
 * `object`, and a path that is not the holder itself for tensors deeper).
 */
const FIXABLE = new Set(['tensor', 'list', 'tuple', 'dict', 'set']);

/** Whether a graph holder is an object of IPython's output cache (agent 0.12.0). */
export function isOutputGraph(graph: IGraphHolder): boolean {
  return graph.root === 'output';
}

/**
 * Whether the "Fix…" action may insert code for a graph holder: the holder
 * must itself be the tensor or the plain container of them (path = name,
 * not `stats['loss']` or `h.loss`; container not `object`); a variable's name must be a Python
 * identifier, the only kind of name ever written into code; an output-cache
 * object (`Out[2]`) is found by its `valueId`, which it must carry.
 */
export function canFixGraph(graph: IGraphHolder): boolean {
  if (graph.path !== graph.name || !FIXABLE.has(graph.container)) {
    return false;
  }
  return isOutputGraph(graph)
    ? VALUE_ID.test(graph.valueId ?? '')
    : isPythonIdentifier(graph.name);
}

/**
 * The output-cache graph holders (`Out[2]` of a displayed
 * `sum(losses) / len(losses)`) whose graphs keep storages that `graph`'s
 * keep too (`sharedWith`), and that its Fix… can detach as well: detaching
 * `losses` alone frees nothing while they live.
 */
export function sharedOutputs(
  graph: IGraphHolder,
  inventory: IInventory | null
): IGraphHolder[] {
  if (isOutputGraph(graph) || !graph.sharedWith?.length) {
    return [];
  }
  const shared = new Set(graph.sharedWith);
  return (inventory?.graphs ?? []).filter(
    g => isOutputGraph(g) && shared.has(g.name) && canFixGraph(g)
  );
}

/** Graph holders for display, largest (CUDA first, then all devices) first. */
export function graphRows(inventory: IInventory | null): IGraphRow[] {
  return (inventory?.graphs ?? [])
    .map(graph => {
      const largest = largestCudaDevice(graph.bytes);
      const bytes = sumBytes(graph.bytes);
      return {
        graph,
        cudaBytes: sumBytes(graph.bytes, isCudaDevice),
        bytes,
        device: largest.device,
        deviceBytes: largest.bytes,
        fixable: canFixGraph(graph) && bytes >= GRAPH_FIX_MIN_BYTES
      };
    })
    .sort(
      (a, b) =>
        b.cudaBytes - a.cudaBytes ||
        b.bytes - a.bytes ||
        a.graph.name.localeCompare(b.graph.name)
    );
}

/**
 * The graph holders worth a warning: at least {@link GRAPH_WARN_BYTES} on one
 * CUDA device.
 */
export function graphsToWarn(inventory: IInventory | null): IGraphRow[] {
  return graphRows(inventory).filter(
    row => row.deviceBytes >= GRAPH_WARN_BYTES
  );
}

/** A `_modules` key or hook variable that may be written in code as a string literal. */
const SAFE_KEY = /^[A-Za-z0-9_]{1,100}$/;

/**
 * The forward hooks that feed a graph holder (`graph.hooks`, agent 0.10.0)
 * that the Fix… cell can name in code: variable an identifier, module keys
 * plain names or numbers.
 */
export function removableHooks(
  graph: IGraphHolder
): NonNullable<IGraphHolder['hooks']> {
  return (graph.hooks ?? []).filter(
    h =>
      isPythonIdentifier(h.variable) &&
      h.modules.every(k => SAFE_KEY.test(k)) &&
      Number.isSafeInteger(h.key)
  );
}

/**
 * The cell the "Fix…" action inserts for one graph holder: it replaces every
 * tensor with a `grad_fn` directly in the variable by `tensor.detach()` (same
 * values, no graph) — in place for a list, dict or set, so other references
 * to the same container see it too; by rebinding for a tuple or a tensor.
 * Nested containers are left alone. When forward hooks feed it
 * ({@link removableHooks}: `h = m[0].register_forward_hook(lambda mod, i,
 * o: feats.append(o))`), those hooks are removed too (by their key in the
 * module's `_forward_hooks`), or the next forward pass would append new
 * graphs.
 *
 * Output-cache objects (`graph` itself when it is one, and `outputs`, from
 * {@link sharedOutputs}) are found by id in IPython's names of them only
 * (`Out[N]`, `_N`, `_`, `__`, `___` in the namespace, its hidden part and
 * the display hook): each is rebound to a copy with its tensors detached (a
 * tensor, or one in a shown list, tuple or dict), never changed in place, so
 * a user's variable naming the same object is left as it is. The cell is
 * self-contained, safe to re-run, and ends without a bare expression.
 *
 * @returns Python source, or null when the holder cannot be fixed safely
 *   ({@link canFixGraph}): no name that is not an identifier reaches code.
 */
export function generateDetachCell(
  graph: IGraphHolder,
  outputs: ReadonlyArray<IGraphHolder> = []
): string | null {
  if (!canFixGraph(graph)) {
    return null;
  }
  const output = isOutputGraph(graph);
  const shown = (output ? [graph, ...outputs] : outputs).filter(
    g => isOutputGraph(g) && canFixGraph(g)
  );
  const name = graph.name;
  const kept = formatBytes(sumBytes(graph.bytes));
  const graphs = `${graph.count} autograd graph${graph.count === 1 ? '' : 's'}`;
  const hooks = output ? [] : removableHooks(graph);
  const hookLines = hooks.length
    ? [
        '',
        `    hooks = (${hooks
          .map(
            h =>
              `("${h.variable}", (${h.modules.map(k => `"${k}",`).join(' ')}), ${h.key})`
          )
          .join(', ')},)`,
        '    for var, keys, key in hooks:  # the forward hooks that append to it',
        '        mod = ns.get(var)',
        '        for k in keys:',
        '            mod = getattr(mod, "_modules", {}).get(k)',
        '        getattr(mod, "_forward_hooks", {}).pop(key, None)'
      ]
    : [];
  const shownNames = shown.map(g => g.name).join(', ');
  const outputLines = shown.length
    ? [
        '',
        '    def drop_all(value):  # a shown tensor, or one in a shown list/tuple/dict/set',
        '        if type(value) in (list, tuple, set):',
        '            return type(value)(drop(v) for v in value)',
        '        if type(value) is dict:',
        '            return {k: drop(v) for k, v in value.items()}',
        '        return drop(value)',
        '',
        '    new = {}  # one copy of each output, under all of its names',
        '    spaces = (ns, ip.user_ns_hidden, vars(ip.displayhook))',
        "    for space in (*spaces, ip.history_manager.output_hist):  # IPython's only",
        '        for key in [k for k, v in list(space.items()) if id(v) in outs]:',
        '            if type(key) is int or re.fullmatch(r"_{1,3}|_\\d+", key):',
        '                old = space[key]',
        '                if id(old) not in new:',
        '                    new[id(old)] = drop_all(old)',
        '                space[key] = new[id(old)]'
      ]
    : [];
  const variableLines = output
    ? []
    : [
        '',
        ...HELD_CHECK,
        '    obj = ns.get(name)',
        '    if obj is None:',
        '        return',
        '    if isinstance(obj, torch.Tensor):',
        '        ns[name] = drop(obj)',
        '    elif isinstance(obj, list):',
        '        obj[:] = [drop(v) for v in obj]',
        '    elif isinstance(obj, dict):',
        '        for key in list(obj):',
        '            obj[key] = drop(obj[key])',
        '    elif isinstance(obj, set):',
        '        values = {drop(v) for v in obj}',
        '        obj.clear()',
        '        obj.update(values)',
        '    elif type(obj) is tuple:',
        '        ns[name] = tuple(drop(v) for v in obj)',
        ...hookLines
      ];
  const what = output
    ? `The displayed output ${name} keeps ${graphs} alive (about ${kept}${graph.truncated ? ' or more' : ''}). It keeps the values and drops the graphs: IPython's names of it (${(graph.names ?? [name]).join(', ')}) get the same value with each tensor's graph dropped (tensor.detach()).`
    : `${name} keeps ${graphs} alive (about ${kept}${graph.truncated ? ' or more' : ''}). It keeps the values and drops the graphs: each tensor with a grad_fn directly in it becomes tensor.detach() (same data, no graph).${shown.length ? ` The displayed output${shown.length === 1 ? '' : 's'} ${shownNames} keep${shown.length === 1 ? 's' : ''} the same graphs: detached too.` : ''}${hooks.length ? ` It removes the forward hook${hooks.length === 1 ? '' : 's'} on ${hooks.map(h => h.module).join(', ')} that append${hooks.length === 1 ? 's' : ''} to it.` : ''}`;
  return [
    DETACH_MARKER,
    ...commentLines(
      `Inserted by jupyterlab-gpu-hygiene: ${what} Next time store loss.item() or loss.detach(), or evaluate under torch.no_grad(). Safe to re-run.`
    ),
    ...helperHead('_gpu_hygiene_detach_graphs', [
      ...(output ? [] : [`name="${name}"`, `held=${pyHeld(graph.valueId)}`]),
      ...(shown.length
        ? [`outs=(${shown.map(g => `${g.valueId},`).join(' ')})`]
        : [])
    ]),
    `    import ${shown.length ? 're, ' : ''}sys`,
    '    from IPython import get_ipython  # works even if the name was rebound',
    '    torch = sys.modules.get("torch")',
    '    ip = get_ipython()',
    '    ns = ip.user_ns',
    '    if torch is None:',
    '        return',
    '',
    '    def drop(value):',
    '        if isinstance(value, torch.Tensor) and value.grad_fn is not None:',
    '            return value.detach()',
    '        return value',
    ...outputLines,
    ...variableLines,
    '',
    '_gpu_hygiene_detach_graphs()',
    ''
  ].join('\n');
}
