/* Euler's method for dy/dt = -rate * y, y(0) = 1, over [0, horizon] in `steps` steps: a
   compiled program as a user may have one, reading a whole number with %d and reals with %lf
   (studies/euler-c-sweep.yaml runs it through sim/cc_run.py, which compiles it once).

   usage: euler INPUT OUTPUT
   INPUT: a title line, then "steps rate horizon" (fscanf "%d %lf %lf")
   OUTPUT: a table without a header, "time y" a line, every digit (%.17g) */
#include <stdio.h>

int main(int argc, char **argv) {
    char title[256];
    int steps;
    double rate, horizon;
    if (argc != 3) {
        fprintf(stderr, "usage: euler INPUT OUTPUT\n");
        return 2;
    }
    FILE *in = fopen(argv[1], "r");
    if (in == NULL || fgets(title, sizeof title, in) == NULL
        || fscanf(in, "%d %lf %lf", &steps, &rate, &horizon) != 3 || steps < 1) {
        fprintf(stderr, "cannot read steps, rate and horizon from %s\n", argv[1]);
        return 1;
    }
    fclose(in);
    FILE *out = fopen(argv[2], "w");
    if (out == NULL) {
        perror(argv[2]);
        return 1;
    }
    double dt = horizon / steps, y = 1.0;
    fprintf(out, "%.17g %.17g\n", 0.0, y);
    for (int i = 1; i <= steps; i++) {
        y -= rate * y * dt;
        fprintf(out, "%.17g %.17g\n", i * dt, y);
    }
    return fclose(out) != 0;
}
