// The busy thread's loop, in a C++ namespace so its symbol is mangled.
namespace hdx_test {
struct Spinner {
    static long spin(long n) __attribute__((noinline));
};
long Spinner::spin(long n)
{
    volatile long acc = 0;
    for (long i = 0; i < n; i++)
        acc = acc + i;
    return acc;
}
} // namespace hdx_test

extern "C" long hdx_test_spin(long n)
{
    return hdx_test::Spinner::spin(n);
}
