#ifndef CALC_H
#define CALC_H

/* The sum of a and b. */
int add(int a, int b);

#endif
