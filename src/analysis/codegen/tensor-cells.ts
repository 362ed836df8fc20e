/**
 * The cells of the explicit actions on a user variable that keeps CUDA
 * tensors outside any model (the `cuda-tensors` finding): "Move to CPU…"
 * and "Delete…". Both are visible, commented, self-contained Python, safe to
 * re-run, that end without a bare expression (nothing pinned in the output
 * cache); only a Python identifier ever reaches code.
 */
import {
  commentSafe,
  HELD_CHECK,
  helperHead,
  isPythonIdentifier,
  pyHeld
} from '../python';
import { formatPlacement } from '../format';
import type { PerDevice } from '../findings/types';

/** First line of the move-to-CPU cell. */
export const MOVE_MARKER = '# gpu-hygiene: move_to_cpu';
/** First line of the delete-variable cell. */
export const DELETE_MARKER = '# gpu-hygiene: delete_variable';

/** The empty-cache tail shared by both cells (4-space indented). */
const TAIL = [
  "    gc.collect()  # then PyTorch's cached blocks back to the driver",
  '    torch = sys.modules.get("torch")',
  '    if torch is not None and torch.cuda.is_initialized():',
  '        torch.cuda.empty_cache()'
];

/**
 * The "Move to CPU…" cell for the variable `name`: it replaces the CUDA
 * tensors of the variable by `.cpu()` copies — the tensor itself, or the
 * items of a list (in place), dict (in place) or tuple (rebound), one level
 * deep; an item that is an Ultralytics `Results` gets its own `.cpu()` copy
 * (boxes, masks); a model is moved in place (`module.cpu()`: a deliberate
 * copy the `model-copy` finding offers to move); anything else is left
 * alone.
 *
 * @param bytes - what the variable alone keeps (for the comment).
 * @param valueId - the root's `valueId`: the cell leaves the name alone when
 *   it holds another object by then.
 * @returns Python source, or null when `name` is not a Python identifier.
 */
export function generateMoveToCpuCell(
  name: string,
  bytes: PerDevice = {},
  valueId?: string
): string | null {
  if (!isPythonIdentifier(name)) {
    return null;
  }
  return [
    MOVE_MARKER,
    commentSafe(
      `# Inserted by jupyterlab-gpu-hygiene: ${name} keeps ${formatPlacement(bytes)}.`,
      79
    ),
    '# Its CUDA tensors become CPU copies (tensor.cpu()): the tensor itself, or',
    '# those in a list, dict or tuple, one level deep. Safe to re-run.',
    ...helperHead('_gpu_hygiene_move_to_cpu', [
      `name="${name}"`,
      `held=${pyHeld(valueId)}`
    ]),
    '    import gc, sys',
    '    from IPython import get_ipython  # works even if the name was rebound',
    '    ns, torch = get_ipython().user_ns, sys.modules.get("torch")',
    '    if torch is None or name not in ns:',
    '        return',
    ...HELD_CHECK,
    '',
    '    def cpu(v):  # a CUDA tensor, a model, or an Ultralytics Results',
    '        if isinstance(v, torch.Tensor) and v.is_cuda:',
    '            return v.cpu()',
    '        if isinstance(v, torch.nn.Module):  # moved in place, as .cpu() does',
    '            return v.cpu()',
    '        if type(v).__module__ == "ultralytics.engine.results":',
    '            return v.cpu()',
    '        return v',
    '',
    '    obj = ns[name]',
    '    if isinstance(obj, list):',
    '        obj[:] = [cpu(v) for v in obj]',
    '    elif isinstance(obj, dict):',
    '        obj.update((k, cpu(v)) for k, v in list(obj.items()))',
    '    elif type(obj) is tuple:',
    '        ns[name] = tuple(cpu(v) for v in obj)',
    '    else:',
    '        ns[name] = cpu(obj)',
    '    del obj',
    ...TAIL,
    '',
    '_gpu_hygiene_move_to_cpu()',
    ''
  ].join('\n');
}

/**
 * The "Delete…" cell for the variable `name` (after the user confirmed): it
 * removes the name from the namespace (already gone is fine), then collects
 * and empties PyTorch's cache. With `also`, those variables are deleted in
 * the same cell (they keep the first one: an optimizer's LR scheduler);
 * when any of the names holds another object by then, none is deleted.
 *
 * @param bytes - what deleting it (them) returns (for the comment).
 * @param valueId - the root's `valueId`: the cell leaves the name alone when
 *   it holds another object by then.
 * @param also - the other variables, each with its root's `valueId`.
 * @returns Python source, or null when a name is not a Python identifier.
 */
export function generateDeleteVariableCell(
  name: string,
  bytes: PerDevice = {},
  valueId?: string,
  also: ReadonlyArray<{ name: string; valueId?: string }> = []
): string | null {
  const targets = [{ name, valueId }, ...also];
  if (!targets.every(t => isPythonIdentifier(t.name))) {
    return null;
  }
  const names = targets.map(t => t.name).join(', ');
  const head = also.length
    ? helperHead('_gpu_hygiene_delete_variable', [
        `names=(${targets.map(t => `"${t.name}"`).join(', ')})`,
        `held=(${targets.map(t => pyHeld(t.valueId)).join(', ')})`
      ])
    : helperHead('_gpu_hygiene_delete_variable', [
        `name="${name}"`,
        `held=${pyHeld(valueId)}`
      ]);
  const check = also.length
    ? [
        '    for name, held in zip(names, held):  # all of them, or none',
        `  ${HELD_CHECK[0]}`,
        `  ${HELD_CHECK[1]}`,
        '    for name in names:',
        '        ns.pop(name, None)'
      ]
    : [...HELD_CHECK, '    ns.pop(name, None)'];
  return [
    DELETE_MARKER,
    commentSafe(
      `# Inserted by jupyterlab-gpu-hygiene: deletes ${names} (you confirmed),`,
      79
    ),
    commentSafe(
      `# which ${also.length ? 'together keep' : 'alone keeps'} ${formatPlacement(bytes)}. Safe to re-run.`,
      79
    ),
    ...head,
    '    import gc, sys',
    '    from IPython import get_ipython  # works even if the name was rebound',
    '    ns = get_ipython().user_ns',
    ...check,
    ...TAIL,
    '',
    '_gpu_hygiene_delete_variable()',
    ''
  ].join('\n');
}
