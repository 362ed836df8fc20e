import { cudaContextRule } from '../../../src/analysis/findings/cuda-context';
import { gpuSample } from '../fixtures';
import { MiB, trans } from './helpers';

describe('cuda-context', () => {
  it('the CUDA context and libraries of the latest sample: info, Restart kernel', () => {
    const [finding] = cudaContextRule({
      inventory: null,
      hello: null,
      sample: gpuSample(8000 * MiB, 80_000 * MiB)
    });
    expect(finding).toMatchObject({
      kind: 'cuda-context',
      severity: 'info',
      subject: 'cuda:0',
      bytes: { 'cuda:0': 636 * MiB },
      fix: { kind: 'restart', bytes: { 'cuda:0': 636 * MiB } }
    });
    expect(finding.explain(trans)).toBe(
      'CUDA context and libraries: 636.0 MiB — freed only by restarting the kernel.'
    );
  });

  it('nothing without a measured share', () => {
    const sample = gpuSample(1, 2);
    sample.devices[0].nonTorch = null;
    expect(cudaContextRule({ inventory: null, hello: null, sample })).toEqual(
      []
    );
    expect(
      cudaContextRule({ inventory: null, hello: null, sample: null })
    ).toEqual([]);
  });
});
