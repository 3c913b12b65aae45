/*
 * Busy loops for tests/system/watch, called from Python through ctypes (which lets
 * go of the GIL for the call, so that another Python thread can end them).
 * Both spin in user mode on a flag until it is set: state R, a whole core,
 * no system call, the same stack all along. Built at -O0 so that neither is
 * folded into the other.
 */

/* A long native computation with no name hangdx knows: CPU-busy work. */
int hdx_test_spin(volatile int *stop)
{
    unsigned long n = 0;
    while (!*stop)
        n++;
    return (int)(n & 1);
}

/*
 * A stand-in for libcudart's cudaStreamSynchronize on a machine without a GPU:
 * CUDA's host wait for a kernel that never ends spins like this (seen on an
 * H200, tests/fixtures/nccl-h200), and hangdx knows the wait by this name
 * (waits.c matches a substring of the symbol).
 */
int hdx_standin_cudaStreamSynchronize(volatile int *stop)
{
    unsigned long spins = 0;
    while (!*stop)
        spins += 2;
    return (int)(spins & 1);
}
