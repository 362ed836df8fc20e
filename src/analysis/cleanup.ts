/**
 * Generation of the clear_gpu cell: visible, commented, self-contained Python
 * that frees what only stale references keep alive.
 *
 * The cell works without the extension (a colleague can re-run it). It never
 * deletes a variable the user still names; it drops output-cache entries that
 * hold stale models, the last exception's traceback, then runs
 * `gc.collect()` and `torch.cuda.empty_cache()` when CUDA is initialised. It
 * ends without a bare expression, so it pins nothing in the output cache itself.
 *
 * The VRAM panel plans for one model: "free" drops only what holds that stale
 * model, and "delete…" (after the user confirmed) starts with `del name` for
 * the variables that name it — valid Python identifiers only.
 */
import type { IInventory, IModelInfo, IRootBytes } from '../protocol';
import { CLEAN_MARKER } from '../protocol';
import { formatBytes, formatPlacement, isCudaDevice, sumBytes } from './format';
import { holderNames } from './stacking';

/** What a clean cell will do, derived from an inventory. */
export interface ICleanPlan {
  /** Output-cache execution counts to drop (`Out[n]` and `_n`). */
  outKeys: number[];
  /** Stale models the plan expects to free. */
  staleModels: IModelInfo[];
  /** User variables that hold models and are kept. */
  keptNames: string[];
  /** Bytes of the stale models (all devices), as reported by the agent. */
  staleBytes: number;
  /** Model id the plan is limited to, or null for every stale model. */
  modelId: string | null;
  /** User variables to delete first (valid Python identifiers only; asked for by the user). */
  deleteNames: string[];
  /** Whether the cell clears the last exception's traceback. */
  clearTraceback: boolean;
  /**
   * Output-cache roots (`Out[n]`, `_n`, `_`, `__`, `___`) that hold CUDA
   * bytes no variable reaches (tensors, containers, models), dropped by the
   * unrestricted plan; their bytes go in the cell's comments. Empty for a
   * plan limited to one model.
   */
  outputs: IRootBytes[];
  /**
   * Of `outputs`, the slots `_`, `__`, `___`: the cell drops the output-cache
   * entries that are their values (the slots do not say which cell they are).
   */
  slots: string[];
}

/** Options of {@link planClean}. */
export interface IPlanOptions {
  /**
   * Limit the plan to this model (an inventory `id`): only the output-cache
   * entries and the traceback that hold it are dropped.
   */
  modelId?: string;
  /**
   * With `modelId`: delete these user variables first (the ones that name
   * the model). Names that are not Python identifiers are left out, never
   * put in code. The model then counts as stale.
   */
  deleteNames?: string[];
}

const OUT_ENTRY = /^Out\[(\d{1,9})\]$/;
const NUMBERED = /^_(\d{1,9})$/;
const SLOTS = ['_', '__', '___'];
const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]*$/;
const KEYWORDS = new Set(
  (
    'False None True and as assert async await break class continue def del elif else except ' +
    'finally for from global if import in is lambda nonlocal not or pass raise return try while with yield'
  ).split(' ')
);

/**
 * Whether `name` can be written in code as a plain Python name (an ASCII
 * identifier that is not a keyword). Holder names come from the kernel and
 * may be anything; only these ever reach generated code.
 */
export function isPythonIdentifier(name: string): boolean {
  return IDENTIFIER.test(name) && !KEYWORDS.has(name);
}

/**
 * Work out the clean plan for an inventory (or an empty plan without one:
 * the cell then still clears the last traceback, collects and empties the cache).
 *
 * @param options - limit the plan to one model, and delete the variables
 *   that name it; without options every stale model is planned.
 */
export function planClean(
  inventory: IInventory | null,
  options: IPlanOptions = {}
): ICleanPlan {
  const outKeys = new Set<number>();
  const kept = new Set<string>();
  const staleModels: IModelInfo[] = [];
  const modelId = options.modelId ?? null;
  const deleteNames =
    modelId === null
      ? []
      : [...new Set(options.deleteNames ?? [])]
          .filter(isPythonIdentifier)
          .sort();
  let clearTraceback = modelId === null;
  for (const model of inventory?.models ?? []) {
    const target = modelId === null || model.id === modelId;
    const stale =
      model.stale || (target && modelId !== null && deleteNames.length > 0);
    if (target && stale) {
      staleModels.push(model);
      if (model.holders.some(h => h.kind === 'traceback')) {
        clearTraceback = true;
      }
    }
    for (const holder of model.holders) {
      if (holder.kind === 'variable') {
        if (
          isPythonIdentifier(holder.name) &&
          !deleteNames.includes(holder.name)
        ) {
          kept.add(holder.name);
        }
        continue;
      }
      if (holder.kind !== 'output' || !stale || !target) {
        continue;
      }
      const match = OUT_ENTRY.exec(holder.name) ?? NUMBERED.exec(holder.name);
      if (match) {
        outKeys.add(Number(match[1]));
      }
    }
  }
  const outputs: IRootBytes[] = [];
  const slots: string[] = [];
  if (modelId === null) {
    // Output-cache entries that hold CUDA memory no variable reaches: their
    // tensors (or containers of tensors) go with the cache entry; a user
    // variable is never touched.
    for (const root of inventory?.roots ?? []) {
      if (root.kind !== 'output' || sumBytes(root.bytes, isCudaDevice) <= 0) {
        continue;
      }
      const match = OUT_ENTRY.exec(root.name) ?? NUMBERED.exec(root.name);
      if (match) {
        outKeys.add(Number(match[1]));
      } else if (SLOTS.includes(root.name)) {
        slots.push(root.name);
      } else {
        continue;
      }
      outputs.push(root);
    }
  }
  return {
    outKeys: [...outKeys].sort((a, b) => a - b),
    staleModels,
    keptNames: [...kept].sort(),
    staleBytes: staleModels.reduce((sum, m) => sum + sumBytes(m.bytes), 0),
    modelId,
    deleteNames,
    clearTraceback,
    outputs,
    slots: SLOTS.filter(slot => slots.includes(slot))
  };
}

/**
 * Make text safe to put in a Python comment: one line, printable, bounded.
 * (Class names and labels come from the kernel and may contain anything.)
 */
export function commentSafe(text: string, maxLength = 120): string {
  const oneLine = text.replace(
    /[\u0000-\u001f\u007f-\u009f\u2028\u2029]/g,
    ' '
  );
  return oneLine.length > maxLength
    ? `${oneLine.slice(0, maxLength - 1)}…`
    : oneLine;
}

function describeStale(model: IModelInfo): string {
  const held = holderNames(model).join(', ');
  return commentSafe(
    `${model.label}, ${formatBytes(sumBytes(model.bytes))}, held by ${held || 'nothing named'}`,
    200
  );
}

function describeOutput(root: IRootBytes): string {
  return commentSafe(
    `${root.name} holds ${formatPlacement(root.bytes)} (${root.models ? 'models, ' : ''}${root.tensors} tensor(s)) no variable names`,
    72
  );
}

/** A Python tuple literal of already-safe items: `()`, `(a,)`, `(a, b)`. */
function pyTuple(items: string[]): string {
  return items.length === 1 ? `(${items[0]},)` : `(${items.join(', ')})`;
}

/**
 * Generate the clear_gpu cell.
 *
 * @param plan - from {@link planClean}.
 * @returns Python source; the first line is {@link CLEAN_MARKER}, which the
 *   agent uses to report `cleaned`.
 */
export function generateCleanCell(plan: ICleanPlan): string {
  const outKeys = pyTuple(plan.outKeys.map(k => String(k)));
  const kept = plan.keptNames.length ? plan.keptNames.join(', ') : 'none';
  const outputs = plan.outputs ?? [];
  const slots = (plan.slots ?? []).filter(s => SLOTS.includes(s));
  const staleLines =
    plan.staleModels.length || outputs.length
      ? [
          ...plan.staleModels.map(
            m => `    # Output cache: ${describeStale(m)}`
          ),
          ...outputs.map(r => `    # Output cache: ${describeOutput(r)}`)
        ]
      : ['    # Output cache: nothing to drop.'];
  // Only identifiers reach code (planClean filters them; checked again here).
  const deleteNames = plan.deleteNames.filter(isPythonIdentifier);
  const params = [
    `out_keys=${outKeys}`,
    ...(slots.length ? [`slots=${pyTuple(slots.map(s => `"${s}"`))}`] : []),
    ...(deleteNames.length
      ? [`names=${pyTuple(deleteNames.map(n => `"${n}"`))}`]
      : [])
  ];
  let header: string[];
  if (deleteNames.length) {
    header = [
      `# It deletes what you chose (${deleteNames.join(', ')}), then the output-cache entries that still hold`,
      `# the same model; other variables are kept: ${commentSafe(kept, 200)}.`
    ];
  } else if (plan.modelId !== null) {
    header = [
      '# It drops only the references that keep one stale model alive; variables you',
      `# still use are kept: ${commentSafe(kept, 200)}.`
    ];
  } else {
    header = [
      '# It drops stale references only (output cache, last traceback, unreachable objects); variables you',
      `# still use are kept: ${commentSafe(kept, 200)}.`
    ];
  }
  const traceback = plan.clearTraceback
    ? [
        "    # Last exception: its traceback keeps the failed cell's frames and their tensors alive.",
        '    tb = getattr(sys, "last_traceback", None)',
        '    if tb is not None:',
        '        tb.tb_next = None',
        '    for attr in ("last_type", "last_value", "last_traceback", "last_exc"):',
        '        if hasattr(sys, attr):',
        '            setattr(sys, attr, None)',
        '    ip.InteractiveTB.tb = None',
        '    if ip.last_execution_result is not None:',
        '        ip.last_execution_result.error_in_exec = None'
      ]
    : [];
  return [
    CLEAN_MARKER,
    '# Inserted by jupyterlab-gpu-hygiene. Self-contained: safe to re-run, also without the extension.',
    ...header,
    `def _gpu_hygiene_clear_gpu(${params.join(', ')}):`,
    '    import gc, sys',
    '    from IPython import get_ipython  # works even if the name was rebound',
    '    ip = get_ipython()',
    '    ns, hidden, out = ip.user_ns, ip.user_ns_hidden, ip.history_manager.output_hist',
    ...(deleteNames.length
      ? [
          '    for name in names:  # the variables you chose; already gone is fine',
          '        ns.pop(name, None)'
        ]
      : []),
    ...staleLines,
    ...(slots.length
      ? [
          '    shown = [ns.get(s) for s in slots]  # also hidden copies, not in Out',
          '    out_keys += tuple(k for k, v in out.items() if any(v is o for o in shown))'
        ]
      : []),
    '    stale = {k: out.pop(k) for k in out_keys if k in out}',
    ...(slots.length
      ? [
          '    stale.update((-1 - i, o) for i, o in enumerate(shown) if o is not None)',
          '    del shown'
        ]
      : []),
    '    for space in (ns, hidden):  # _<k> only while it is that same output',
    '        for name in [f"_{k}" for k, obj in stale.items() if space.get(f"_{k}") is obj]:',
    '            del space[name]',
    '    for slot in ("_", "__", "___"):',
    '        if any(ns.get(slot) is obj for obj in stale.values()):',
    '            ns[slot] = hidden[slot] = ""',
    '            setattr(ip.displayhook, slot, "")',
    "    last = ip.last_execution_result  # the previous cell's result while this one runs",
    '    if last is not None and any(last.result is obj for obj in stale.values()):',
    '        last.result = None',
    '    del stale, last',
    ...traceback,
    "    # Unreachable objects (reference cycles), then PyTorch's cached blocks back to the driver.",
    '    gc.collect()',
    '    torch = sys.modules.get("torch")',
    '    if torch is not None and torch.cuda.is_initialized():',
    '        torch.cuda.empty_cache()',
    '',
    '',
    '_gpu_hygiene_clear_gpu()',
    'del _gpu_hygiene_clear_gpu',
    ''
  ].join('\n');
}
