#include <stdio.h>

#include "add.h"

int main(void) {
  if (add(2, 3) != 5) {
    fprintf(stderr, "add(2, 3) != 5\n");
    return 1;
  }
  puts("ok");
  return 0;
}
