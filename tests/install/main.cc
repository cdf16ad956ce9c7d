// Links postal::postal from an installed package. Include postal headers here as the public API
// settles, so the check also covers installed headers.
int main() { return 0; }
