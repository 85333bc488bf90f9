/* Ishigami as a small compiled program, the stand-in for a simulation code: reads
   {"x1": .., "x2": .., "x3": ..} from the file argv[1], writes {"y": ..} to the file argv[2]. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static double field(const char *text, const char *name) {
    const char *at = strstr(text, name);
    if (!at) { fprintf(stderr, "no %s in the input\n", name); exit(2); }
    at = strchr(at + strlen(name), ':');
    return strtod(at + 1, NULL);
}

int main(int argc, char **argv) {
    char text[4096];
    if (argc != 3) { fprintf(stderr, "usage: %s INPUT OUTPUT\n", argv[0]); return 2; }
    FILE *in = fopen(argv[1], "r");
    if (!in) { perror(argv[1]); return 1; }
    size_t n = fread(text, 1, sizeof text - 1, in);
    fclose(in);
    text[n] = 0;
    double x1 = field(text, "\"x1\""), x2 = field(text, "\"x2\""), x3 = field(text, "\"x3\"");
    double y = sin(x1) + 7.0 * sin(x2) * sin(x2) + 0.1 * pow(x3, 4) * sin(x1);
    FILE *out = fopen(argv[2], "w");
    if (!out) { perror(argv[2]); return 1; }
    fprintf(out, "{\"y\": %.17g}\n", y);
    return fclose(out) != 0;
}
