/* process_start's empty program with glibc's start-up (process_start.c). */
int main(void) { return 0; }
