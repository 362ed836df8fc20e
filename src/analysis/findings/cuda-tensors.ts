/**
 * CUDA tensors in user variables: a variable whose root keeps CUDA bytes and
 * no model (a list of inference results on the GPU, a dict of activations).
 * Info. Variables that keep autograd graphs, a caught exception or an
 * optimizer are `graph-holder`, `kept-error` and `optimizer` findings
 * instead.
 *
 * Bytes: the root's `sole` (what deleting the variable returns); storage it
 * shares with another holder (a library's predictor keeping the last
 * result, `last = results[-1]`) is `sharedBytes`, shown as shared, never
 * given to one of them. A list that merely holds a model's parameters keeps
 * no bytes of its own (the agent counts those under the model): no finding.
 * A variable whose CUDA bytes are all shared is listed (so that nothing is
 * hidden) without a fix: moving or deleting it alone frees nothing.
 *
 * Fix: "Move to CPU…" (asks; Delete is offered in the same dialog), for a
 * variable whose name is a Python identifier. Without `sole` (an older
 * agent) the bytes are the first-come `bytes`.
 */
import { isPythonIdentifier } from '../python';
import {
  formatBytes,
  formatPlacement,
  isCudaDevice,
  sumBytes
} from '../format';
import { keptErrorNames } from './kept-error';
import { optimizerNames } from './optimizer';
import type { FindingRule, IFinding } from './types';

/** The cuda-tensors rule: one finding per variable root. */
export const cudaTensorsRule: FindingRule = ({ inventory }) => {
  // variables another rule tells: graph holders, kept errors, optimizers
  const graphs = new Set([
    ...(inventory?.graphs ?? []).map(g => g.name),
    ...keptErrorNames(inventory?.keptErrors),
    ...optimizerNames(inventory?.optimizers)
  ]);
  const found: IFinding[] = [];
  for (const root of inventory?.roots ?? []) {
    if (
      root.kind !== 'variable' ||
      root.models !== 0 ||
      graphs.has(root.name)
    ) {
      continue;
    }
    const bytes = { ...(root.sole ?? root.bytes) };
    const shared = { ...(root.shared ?? {}) };
    const sole = sumBytes(bytes, isCudaDevice);
    if (sole <= 0 && sumBytes(shared, isCudaDevice) <= 0) {
      continue;
    }
    const sharedWith = [...(root.sharedWith ?? [])];
    const fixable = sole > 0 && isPythonIdentifier(root.name);
    found.push({
      kind: 'cuda-tensors',
      id: `cuda-tensors:${root.name}`,
      severity: 'info',
      subject: root.name,
      bytes,
      ...(sumBytes(shared) > 0 ? { sharedBytes: shared, sharedWith } : {}),
      explain: trans => {
        const others = sharedWith.join(', ') || trans.__('another holder');
        if (sole <= 0) {
          return trans.__(
            '%1 holds CUDA tensors outside any model (%2), all shared with %3: deleting or moving %1 alone frees nothing.',
            root.name,
            formatPlacement(shared, trans),
            others
          );
        }
        const text = root.tensors
          ? trans._n(
              '%2 holds %1 tensor outside any model: %3. Move it to the CPU or delete it when done.',
              '%2 holds %1 tensors outside any model: %3. Move them to the CPU or delete it when done.',
              root.tensors,
              root.name,
              formatPlacement(bytes, trans)
            )
          : trans.__(
              '%1 holds tensors outside any model: %2. Move them to the CPU or delete it when done.',
              root.name,
              formatPlacement(bytes, trans)
            );
        return sumBytes(shared) > 0
          ? `${text} ${trans.__(
              '%1 more is shared with %2 and stays while %2 holds it.',
              formatBytes(sumBytes(shared)),
              others
            )}`
          : text;
      },
      evidence: [root.name, ...sharedWith],
      fix: fixable ? { kind: 'tensors', name: root.name } : { kind: 'none' }
    });
  }
  return found;
};
