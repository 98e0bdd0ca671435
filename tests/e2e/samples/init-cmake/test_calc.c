#include <stdio.h>

#include "calc.h"

int main(void) {
  if (add(2, 3) != 5) {
    puts("add(2, 3) is wrong");
    return 1;
  }
  puts("ok");
  return 0;
}
