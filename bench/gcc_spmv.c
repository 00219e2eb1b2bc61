// The CSR SpMV loop tensorc emits, compiled by gcc, on the same 3-D 7-point
// stencil (grid 126, 2M rows) as `gen_matrix stencil7 126`: the baseline for
// "within 10% of gcc -O3". Run: gcc -O3 -march=native bench/gcc_spmv.c -o /tmp/spmv && /tmp/spmv
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <time.h>
#include <sys/mman.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
int cmp(const void*a,const void*b){double x=*(double*)a,y=*(double*)b;return x<y?-1:x>y;}
int main(int argc,char**argv){
  int g=126; int64_t n=(int64_t)g*g*g;
  int32_t*pos=malloc((n+1)*4); int32_t*crd=malloc(n*7*4); double*vals=malloc(n*7*8);
  double*x=malloc(n*8),*y=malloc(n*8);
  madvise(crd,n*7*4,MADV_HUGEPAGE); madvise(vals,n*7*8,MADV_HUGEPAGE);
  int64_t nnz=0; pos[0]=0;
  for(int64_t r=0;r<n;r++){int64_t s[3]={1,g,(int64_t)g*g};
    int64_t nb[7];int k=0; for(int d=2;d>=0;d--) if(r/s[d]%g>0) nb[k++]=r-s[d];
    nb[k++]=r; for(int d=0;d<3;d++) if(r/s[d]%g+1<g) nb[k++]=r+s[d];
    for(int a=0;a<k;a++){crd[nnz]=nb[a];vals[nnz]=(nnz%7)*0.1-0.3;nnz++;} pos[r+1]=nnz;}
  for(int64_t i=0;i<n;i++) x[i]=(i%13)*0.01;
  double ts[20];
  for(int rep=0;rep<21;rep++){double t0=now();
    for (int64_t pz = 0; pz < n; pz++) y[pz] = 0.0;
    for (int64_t iA = 0; iA < n; iA++) {
      double tsum = 0.0;
      int64_t b = pos[iA], e = pos[iA + 1];
      for (int64_t p = b; p < e; p++) tsum += vals[p] * x[crd[p]];
      y[iA] += tsum;
    }
    if(rep) ts[rep-1]=now()-t0;}
  qsort(ts,20,8,cmp); printf("gcc -O3 (with zero fill) median %.3f ms\n",ts[10]*1e3);
  for(int rep=0;rep<21;rep++){double t0=now();
    for (int64_t iA = 0; iA < n; iA++) {
      double tsum = 0.0;
      int64_t b = pos[iA], e = pos[iA + 1];
      for (int64_t p = b; p < e; p++) tsum += vals[p] * x[crd[p]];
      y[iA] = tsum;
    }
    if(rep) ts[rep-1]=now()-t0;}
  qsort(ts,20,8,cmp); printf("gcc -O3 (store) median %.3f ms  nnz %ld\n",ts[10]*1e3,nnz);
  return 0;}
