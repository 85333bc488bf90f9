/* Test helper: reads a whole number with %d, a real with %lf and a whole number with %d from the
   file INPUT (the rest of its first line is a title) and writes them back on one line, the real
   with every digit: `n x m`.  usage: echo INPUT OUTPUT */
#include <stdio.h>

int main(int argc, char **argv) {
    char title[256];
    int n, m;
    double x;
    FILE *in = fopen(argv[1], "r");
    if (in == NULL || fgets(title, sizeof title, in) == NULL
        || fscanf(in, "%d %lf %d", &n, &x, &m) != 3) {
        fprintf(stderr, "cannot read n, x and m from %s\n", argv[1]);
        return 1;
    }
    FILE *out = fopen(argv[2], "w");
    fprintf(out, "%d %.17g %d\n", n, x, m);
    return fclose(out) != 0;
}
