"""Process utilities below every other layer: atomic writes, the quiet log, the persistent XLA
compilation cache, host memory tuning, the workdir lock."""
