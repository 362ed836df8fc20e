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
import { CLEAN_MARKER } from '../protocol-constants';
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
   * bytes no variable keeps (tensors, containers, models: their `sole`, or
   * bytes shared only with other output-cache entries), dropped by the
   * unrestricted plan; their bytes go in the cell's comments, one line per
   * cell. Empty for a plan limited to one model.
   */
  outputs: IRootBytes[];
  /**
   * Of `outputs`, the hidden copies that name no `Out` entry (`cells`
   * empty: `_7`, `__` left by `del Out[7]` or `%reset -f out`; or, from an
   * agent without `cells`, the slots `_`, `__`, `___`): the cell drops what
   * IPython's names of that slot hold (user_ns_hidden, the display hook,
   * for `_` the last result) and every other name of the same objects.
   */
  copies: string[];
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
/** Names of the output cache: `_`, `__`, `___`, `_N`, `Out[N]`. */
const OUTPUT_NAME = /^(?:_{1,3}|_\d{1,9}|Out\[\d{1,9}\])$/;

/**
 * Whether the unrestricted plan drops an output root: it keeps CUDA bytes
 * that dropping the output cache returns — its own (`sole`), or bytes it
 * shares only with other output-cache entries. Without `sole` (an older
 * agent): CUDA bytes first attributed to it. A tensor a variable also names
 * is never planned.
 */
function dropsCuda(root: IRootBytes): boolean {
  if (root.sole === undefined) {
    return sumBytes(root.bytes, isCudaDevice) > 0;
  }
  if (sumBytes(root.sole, isCudaDevice) > 0) {
    return true;
  }
  const others = root.sharedWith ?? [];
  return (
    sumBytes(root.shared ?? {}, isCudaDevice) > 0 &&
    others.length > 0 &&
    others.every(n => OUTPUT_NAME.test(n))
  );
}
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
  const copies = new Set<string>();
  if (modelId === null) {
    // Output-cache entries that hold CUDA memory no variable reaches: their
    // tensors (or containers of tensors) go with the cache entry; a user
    // variable is never touched.
    for (const root of inventory?.roots ?? []) {
      if (root.kind !== 'output' || !dropsCuda(root)) {
        continue;
      }
      const cells = (root.cells ?? []).filter(
        c => Number.isSafeInteger(c) && c >= 0
      );
      const match = OUT_ENTRY.exec(root.name) ?? NUMBERED.exec(root.name);
      if (cells.length) {
        cells.forEach(c => outKeys.add(c));
      } else if (root.cells === undefined && match) {
        outKeys.add(Number(match[1]));
      } else if (SLOTS.includes(root.name) || NUMBERED.test(root.name)) {
        copies.add(root.name); // a hidden copy: no Out entry names it
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
    copies: [...copies].sort(copyOrder)
  };
}

/** `_`, `__`, `___` first, then `_N` by N. */
function copyOrder(a: string, b: string): number {
  const rank = (n: string) =>
    SLOTS.includes(n) ? n.length - 4 : Number(n.slice(1));
  return rank(a) - rank(b);
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

/** Width of the cell's comment lines (PEP 8's 79 columns). */
const COMMENT_WIDTH = 79;

function describeStale(model: IModelInfo): string {
  const held = holderNames(model).join(', ');
  return commentSafe(
    `# ${model.label}, ${formatBytes(sumBytes(model.bytes))} (${held || 'nothing named'})`,
    COMMENT_WIDTH
  );
}

/** Per device, the largest figure (the names of one object keep the same storages). */
function largest(list: ReadonlyArray<Record<string, number>>) {
  const out: Record<string, number> = {};
  for (const bytes of list) {
    for (const [device, value] of Object.entries(bytes)) {
      out[device] = Math.max(out[device] ?? 0, value);
    }
  }
  return out;
}

/**
 * One comment line per planned cell (its output-cache names together) and
 * per hidden copy: `# cell [4]: 64.0 MiB on cuda:0, 1 tensor(s) (Out[4], _4)`.
 */
function describeOutputs(outputs: ReadonlyArray<IRootBytes>): string[] {
  const groups = new Map<string, IRootBytes[]>();
  for (const root of outputs) {
    const cells = root.cells ?? [];
    const legacy = root.cells === undefined;
    const key = cells.length
      ? cells.map(c => `[${c}]`).join(', ')
      : legacy && (OUT_ENTRY.test(root.name) || NUMBERED.test(root.name))
        ? `[${(OUT_ENTRY.exec(root.name) ?? NUMBERED.exec(root.name))?.[1]}]`
        : '';
    const name = key
      ? `cell ${key}`
      : legacy
        ? `a recent cell's ${root.name}`
        : `hidden copy ${root.name}`;
    groups.set(name, [...(groups.get(name) ?? []), root]);
  }
  return [...groups].map(([name, roots]) => {
    const bytes = largest(roots.map(r => r.sole ?? r.bytes));
    const tensors = Math.max(...roots.map(r => r.tensors));
    const what = roots.some(r => r.models) ? 'models, ' : '';
    const count = tensors ? `, ${what}${tensors} tensor(s)` : '';
    const names = roots.map(r => r.name).join(', ');
    const by = name.startsWith('cell') ? ` (${names})` : '';
    return commentSafe(
      `# ${name}: ${formatPlacement(bytes)}${count}${by}`,
      COMMENT_WIDTH
    );
  });
}

/**
 * Words of `text` as comment lines of at most {@link COMMENT_WIDTH} columns.
 */
function wrapComment(text: string): string[] {
  const lines: string[] = [];
  let line = '#';
  for (const word of commentSafe(text, 400).split(' ').filter(Boolean)) {
    if (line.length + 1 + word.length > COMMENT_WIDTH && line !== '#') {
      lines.push(line);
      line = '#';
    }
    line += ` ${word}`;
  }
  return [...lines, line];
}

/** A Python tuple literal of already-safe items: `()`, `(a,)`, `(a, b)`. */
function pyTuple(items: string[]): string {
  return items.length === 1 ? `(${items[0]},)` : `(${items.join(', ')})`;
}

/**
 * Generate the clear_gpu cell (about 25 lines; comments within 79 columns).
 *
 * What it drops, whatever the IPython version: for each planned cell
 * `Out[N]` (IPython's `output_hist`), for each hidden copy what IPython's
 * names of that slot hold (`user_ns_hidden`, the display hook's `_`, `__`,
 * `___`, for `_` the last result); then every name IPython gave those very
 * objects — `_`, `__`, `___`, `_N` in `user_ns` (only while
 * `user_ns_hidden` holds the same object there: never a user's own
 * variable), in `user_ns_hidden` and the display hook, and
 * `last_execution_result.result`.
 *
 * @param plan - from {@link planClean}.
 * @returns Python source; the first line is {@link CLEAN_MARKER}, which the
 *   agent uses to report `cleaned`.
 */
export function generateCleanCell(plan: ICleanPlan): string {
  const outKeys = pyTuple(plan.outKeys.map(k => String(k)));
  const kept = plan.keptNames.length ? plan.keptNames.join(', ') : 'none';
  const outputs = plan.outputs ?? [];
  const copies = (plan.copies ?? []).filter(
    c => SLOTS.includes(c) || NUMBERED.test(c)
  );
  const dropped =
    plan.staleModels.length || outputs.length
      ? [...plan.staleModels.map(describeStale), ...describeOutputs(outputs)]
      : ['# Output cache: nothing to drop.'];
  // Only identifiers reach code (planClean filters them; checked again here).
  const deleteNames = plan.deleteNames.filter(isPythonIdentifier);
  const params = [
    `out_keys=${outKeys}`,
    ...(copies.length ? [`copies=${pyTuple(copies.map(s => `"${s}"`))}`] : []),
    ...(deleteNames.length
      ? [`names=${pyTuple(deleteNames.map(n => `"${n}"`))}`]
      : [])
  ];
  let header: string[];
  if (deleteNames.length) {
    header = wrapComment(
      `Deletes what you chose (${deleteNames.join(', ')}), then the output-cache entries of that model; kept: ${kept}.`
    );
  } else if (plan.modelId !== null) {
    header = wrapComment(
      `Drops only what keeps one stale model alive; still named, so kept: ${kept}.`
    );
  } else {
    header = wrapComment(
      `Drops stale references only; still named, so kept: ${kept}.`
    );
  }
  const traceback = plan.clearTraceback
    ? [
        '    if getattr(sys, "last_traceback", None) is not None:  # the failed frames',
        '        sys.last_traceback.tb_next = None',
        '    sys.last_type = sys.last_value = sys.last_traceback = sys.last_exc = None',
        '    ip.InteractiveTB.tb = None'
      ]
    : [];
  return [
    CLEAN_MARKER,
    '# Inserted by jupyterlab-gpu-hygiene; safe to re-run, also without it.',
    ...header,
    ...dropped,
    `def _gpu_hygiene_clear_gpu(${params.join(', ')}):`,
    '    import gc, re, sys',
    '    ip = sys.modules["IPython"].get_ipython()  # also if the name was rebound',
    '    ns, hid, dh, last = ip.user_ns, ip.user_ns_hidden, ip.displayhook, ip.last_execution_result',
    ...(deleteNames.length
      ? [
          '    for name in names:  # the variables you chose; already gone is fine',
          '        ns.pop(name, None)'
        ]
      : []),
    '    out = ip.history_manager.output_hist  # Out: the planned cells go',
    '    old = [out.pop(k) for k in out_keys if k in out]',
    ...(copies.length
      ? [
          '    shown = [hid.get(c) for c in copies] + [getattr(dh, c, None) for c in copies]',
          '    shown += [getattr(last, "result", None)] if "_" in copies else []',
          '    old += [o for o in shown if o is not None and type(o) is not str]'
        ]
      : []),
    "    for s in (ns, hid, vars(dh)):  # IPython's own names of those objects",
    '        for n in [n for n, v in s.items() if re.fullmatch(r"_{1,3}|_\\d+", str(n))',
    '                  and any(v is o for o in old) and (s is not ns or hid.get(n) is v)]:',
    '            s[n] = ""  # _, __, ___ become "" (as IPython resets them); _N go',
    '            if n.strip("_"): del s[n]',
    ...(plan.clearTraceback
      ? [
          '    if last is not None:',
          '        last.error_in_exec = None',
          '        last.result = None if any(last.result is o for o in old) else last.result'
        ]
      : [
          '    if last is not None and any(last.result is o for o in old):',
          '        last.result = None'
        ]),
    ...traceback,
    '    del old, last',
    "    gc.collect()  # reference cycles; then PyTorch's cache back to the driver",
    '    torch = sys.modules.get("torch")',
    '    if torch is not None and torch.cuda.is_initialized():',
    '        torch.cuda.empty_cache()',
    '_gpu_hygiene_clear_gpu()',
    'del _gpu_hygiene_clear_gpu',
    ''
  ].join('\n');
}
