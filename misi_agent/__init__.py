"""misi-agent: a neuro-symbolic agent for microscopic spatial intelligence (MiSI-Bench).

Importing the package pins OpenBLAS's kernel (:mod:`misi_agent.reproducibility`) before numpy loads it, so that the
image-only pipelines give the same answers on every x86-64 Linux machine with AVX2.
"""

from misi_agent.reproducibility import pin_blas_kernel

pin_blas_kernel()
