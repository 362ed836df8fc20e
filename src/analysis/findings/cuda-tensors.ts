/**
 * CUDA tensors in user variables: a variable whose root holds CUDA bytes and
 * no model (a list of inference results on the GPU, a dict of activations).
 * Info. Variables that keep autograd graphs are `graph-holder` findings
 * instead. No button yet: the delete command frees a model, and no command
 * deletes or moves a plain variable.
 */
import { formatPlacement, isCudaDevice, sumBytes } from '../format';
import type { FindingRule, IFinding } from './types';

/** The cuda-tensors rule: one finding per variable root. */
export const cudaTensorsRule: FindingRule = ({ inventory }) => {
  const graphs = new Set((inventory?.graphs ?? []).map(g => g.name));
  return (inventory?.roots ?? [])
    .filter(
      r =>
        r.kind === 'variable' &&
        r.models === 0 &&
        !graphs.has(r.name) &&
        sumBytes(r.bytes, isCudaDevice) > 0
    )
    .map((root): IFinding => ({
      kind: 'cuda-tensors',
      id: `cuda-tensors:${root.name}`,
      severity: 'info',
      subject: root.name,
      bytes: { ...root.bytes },
      explain: trans =>
        trans._n(
          '%2 holds %1 tensor outside any model: %3. Delete it or move it to the CPU when done.',
          '%2 holds %1 tensors outside any model: %3. Delete it or move them to the CPU when done.',
          root.tensors,
          root.name,
          formatPlacement(root.bytes)
        ),
      evidence: [root.name],
      fix: { kind: 'none' }
    }));
};
