/* LD_PRELOAD helper for device machines without gdb: on SIGSEGV/SIGBUS/SIGABRT, print the faulting
 * address and the native stack (each frame as library+offset, for addr2line -f -C -e LIBRARY OFFSET),
 * then die with the signal.
 *   gcc -shared -fPIC -O1 -o /tmp/segv_backtrace.so benchmarks/segv_backtrace.c -ldl
 *   LD_PRELOAD=/tmp/segv_backtrace.so python3 ... */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <execinfo.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static void on_fault(int sig, siginfo_t* info, void* ctx) {
  (void)ctx;
  void* frames[64];
  int n = backtrace(frames, 64);
  fprintf(stderr, "\n=== signal %d (%s) at address %p; native stack:\n", sig, strsignal(sig), info->si_addr);
  for (int i = 0; i < n; ++i) {
    Dl_info d;
    if (dladdr(frames[i], &d) && d.dli_fname) {
      fprintf(stderr, "#%-2d %s+0x%lx  %s\n", i, d.dli_fname,
              (unsigned long)((char*)frames[i] - (char*)d.dli_fbase), d.dli_sname ? d.dli_sname : "?");
    } else {
      fprintf(stderr, "#%-2d %p\n", i, frames[i]);
    }
  }
  fflush(stderr);
  signal(sig, SIG_DFL);
  raise(sig);
}

__attribute__((constructor)) static void install(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_fault;
  sa.sa_flags = SA_SIGINFO | SA_RESETHAND;
  sigaction(SIGSEGV, &sa, NULL);
  sigaction(SIGBUS, &sa, NULL);
  sigaction(SIGABRT, &sa, NULL);
}
