# Make the HTML report's page (report/html_page.html) into a C array: cmake -DIN=page -DOUT=file.c
# -P embed.cmake. The array is the file's bytes and a NUL (report/html.c: hdx_html_page).
file(READ "${IN}" hex HEX)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
string(REGEX REPLACE "(0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,)" "\\1\n" bytes "${bytes}")
file(WRITE "${OUT}" "/* Made from report/html_page.html by report/embed.cmake; do not edit. */\n"
                    "extern const char hdx_html_page[];\n"
                    "const char hdx_html_page[] = {\n${bytes}0x00};\n")
