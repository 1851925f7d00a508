// libbluetooth (Debian libbluetooth-dev): HCI device information for adapter availability.
#include <sys/socket.h>
#include <bluetooth/bluetooth.h>
#include <bluetooth/hci.h>
#include <bluetooth/hci_lib.h>
