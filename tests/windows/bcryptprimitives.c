/*
 * A stand-in for Windows' bcryptprimitives.dll, for running the test build under Wine only.
 *
 * Rust's std (since 1.78) draws its random bytes (HashMap's keys, among others) from
 * ProcessPrng in bcryptprimitives.dll and imports it at load time. Wine 8 (Debian 12's) has
 * no bcryptprimitives.dll, so every Rust .exe fails to start under it. This DLL exports that
 * one function, over SystemFunction036 (RtlGenRandom, in advapi32), which Wine has.
 *
 * tests/windows/wine-runner.sh (cargo's runner for x86_64-pc-windows-gnu) builds it with mingw
 * and puts it beside the test executable. It is never shipped: a real Windows has the real DLL
 * in system32, and the release build neither contains nor needs this file.
 *
 *     x86_64-w64-mingw32-gcc -shared -O2 -o bcryptprimitives.dll bcryptprimitives.c -ladvapi32
 */
#include <windows.h>

/* RtlGenRandom: exported by advapi32 under this name. */
BOOLEAN WINAPI SystemFunction036(PVOID RandomBuffer, ULONG RandomBufferLength);

/* BOOL ProcessPrng(PBYTE pbData, SIZE_T cbData): fills the buffer; always TRUE on Windows. */
__declspec(dllexport) BOOL WINAPI ProcessPrng(PBYTE pbData, SIZE_T cbData)
{
    while (cbData > 0) {
        ULONG chunk = cbData > (SIZE_T)0xFFFFFFFFu ? 0xFFFFFFFFu : (ULONG)cbData;
        if (!SystemFunction036(pbData, chunk)) {
            return FALSE;
        }
        pbData += chunk;
        cbData -= chunk;
    }
    return TRUE;
}
